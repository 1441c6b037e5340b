"""`benchctl local up`: its targets checked before anything starts, and the API's port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from benchctl.local_state import FUNCTIONS_HOST_PORT, api_port_for, port_free, remember_port

pytestmark = pytest.mark.slow  # each runs the CLI: a Python start-up of seconds


@pytest.mark.parametrize(
    ("declaration", "named"),
    [
        (["--target-limits", "scratch=read_mibps=fast"], "--target-limits scratch: 'read_mibps"),
        (["--target-limits", "nosuch=iops=5"], "--target-limits nosuch: no --target"),
        (["--target-facts", "scratch={oops"], "--target-facts scratch: not JSON"),
        (["--target-facts", 'scratch={"kind": "anf", "service_level": "gold"}'], "service_level"),
        (["--target-facts", 'scratch={"kind": "managed-disk", "sku": "P99"}'], "sku"),
    ],
)
def test_local_up_refuses_a_bad_declaration_naming_the_flag_and_field(
    declaration: list[str], named: str, tmp_path: Path
) -> None:
    """`benchctl local up` checks its target declarations the way the API checks
    BENCH_TARGETS, before anything starts: exit 2, the flag and the field named."""
    argv = ["local", "up", "--agents", "1", "--target", f"scratch={tmp_path}", *declaration]
    out = subprocess.run(
        [sys.executable, "-m", "benchctl", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BENCH_LOCAL_DIR": str(tmp_path / "state")},
    )
    assert out.returncode == 2, out.stderr
    assert named in out.stderr, out.stderr
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").iterdir())


def test_local_up_refuses_a_target_that_does_not_exist(tmp_path: Path) -> None:
    """A typo in a target's directory would have benchmarked the disk holding its parent:
    refused (exit 2, the flag named), nothing created or started; --create makes it."""
    ghost = tmp_path / "no" / "such" / "dir"
    argv = ["local", "up", "--agents", "1", "--target", f"ghost={ghost}"]
    out = subprocess.run(
        [sys.executable, "-m", "benchctl", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BENCH_LOCAL_DIR": str(tmp_path / "state")},
    )
    assert out.returncode == 2, out.stderr
    assert f"--target ghost={ghost}: no such directory (give --create" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "no").exists() and not (tmp_path / "state").exists()
    afile = tmp_path / "afile"
    afile.write_text("")
    argv = ["local", "up", "--agents", "1", "--target", f"ghost={afile}", "--create"]
    out = subprocess.run(
        [sys.executable, "-m", "benchctl", *argv], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "not a directory" in out.stderr, out.stderr


def test_the_api_keeps_the_port_it_had(tmp_path: Path) -> None:
    """First 7071 (the Functions host's port) when free; then the port the stack had, so
    bookmarks of the UI keep working; another free port only when that one is taken."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        busy = taken.getsockname()[1]
        remember_port(tmp_path, busy)
        port, note = api_port_for(tmp_path)
        assert port != busy and note is not None and f"port {busy}" in note
    port, note = api_port_for(tmp_path)  # free again: the port it had
    assert (port, note) == (busy, None)
    fresh = tmp_path / "fresh"
    port, note = api_port_for(fresh)
    if port_free(FUNCTIONS_HOST_PORT) or port == FUNCTIONS_HOST_PORT:
        assert (port, note) == (FUNCTIONS_HOST_PORT, None)
    else:  # another stack on this machine has it now
        assert note == f"port 7071 is in use: the API is on {port} this time"
