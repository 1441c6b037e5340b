"""A bench stopped with SIGTERM stops the stack it started (its ``finally``), as with
Ctrl-C: a 1,000-client bench of bench/scale.py killed so on 2026-11-29 left its three API
instances running, and they went on using the CPU under the benches measured after it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.test_e2e import alive

ROOT = Path(__file__).resolve().parent.parent


def descendants(pid: int) -> set[int]:
    """Every live process under ``pid`` (its children, theirs, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def names(pid: int) -> set[str]:
    """Which of the stack's programs run under ``pid``."""
    found = set()
    for child in descendants(pid):
        try:
            cmd = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        found |= {name for name in ("local_api", "simagent", "azurite", "cosmosdb") if name in cmd}
    return found


@pytest.mark.stack
def test_a_bench_stopped_with_sigterm_leaves_nothing_running(tmp_path: Path) -> None:
    bench = subprocess.Popen(
        [sys.executable, "bench/scale.py", "--clients", "100", "--work", str(tmp_path)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # Its stack and fleet are up: the servers, the API and the simulated clients.
        wait_until(lambda: {"local_api", "simagent"} <= names(bench.pid), 60, what="its stack")
        started = descendants(bench.pid)
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(timeout=60) != 0
    finally:
        if bench.poll() is None:
            bench.kill()
    try:
        wait_until(lambda: not any(alive(p) for p in started), 30, what="its processes to end")
    finally:  # none left behind by this test either
        for pid in started:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
