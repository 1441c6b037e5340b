"""`benchctl local up --target-limits/--target-facts`: checked before anything starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
