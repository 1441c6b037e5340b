"""Two agents started with the same id on one host do not share a work directory (issue
24, point 5): each process works in ``<tmp>/benchagent-<id>/p<pid>/`` and holds its
flock; a dead process's directory is removed by the next agent of that id. Real agent
processes, real fio, the real stack."""

from __future__ import annotations

import fcntl
import os
import signal
import tempfile
from pathlib import Path

import httpx
import pytest

from benchctl import localstack
from benchctl.localstack import Proc, Stack
from tests.conftest import run_body, wait_state, wait_until
from tests.test_e2e import children

pytestmark = pytest.mark.fio


def held(lock: Path) -> bool:
    """Whether another process holds an exclusive flock on ``lock``."""
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_agents_of_one_id_work_in_directories_of_their_own(
    stack: Stack, api: httpx.Client, pool: str, tmp_path: Path
) -> None:
    agent_id = f"{pool}-twin"
    root = Path(tempfile.gettempdir()) / f"benchagent-agent-{agent_id}"
    targets = {"scratch": str(tmp_path / "s"), "other": str(tmp_path / "o")}
    for d in targets.values():
        Path(d).mkdir()
    started: list[Proc] = []

    def start() -> Proc:
        p = localstack.start_agent(stack, agent_id, pool=pool, targets=targets)
        started.append(p)
        lock = root / f"p{p.pid}" / ".lock"
        wait_until(lambda: lock.exists() and held(lock), 15, what=f"{lock} held")
        return p

    try:
        one, two = start(), start()
        assert sorted(root.iterdir()) == sorted([root / f"p{one.pid}", root / f"p{two.pid}"])
        # Both at work at once, each fio in its own process's directory.
        runs = [
            api.post("/api/runs", json={**run_body(pool, runtime=3), "target": t}).json()["id"]
            for t in targets
        ]
        fios = wait_until(
            lambda: (f := children(one.pid) + children(two.pid)) and len(f) == 2 and f,
            30,
            0.05,
            what="two fio",
        )
        cwds = {Path(os.readlink(f"/proc/{pid}/cwd")).parent for pid in fios}
        assert cwds == {root / f"p{one.pid}", root / f"p{two.pid}"}
        for run_id in runs:
            assert wait_state(api, run_id, ("completed", "failed"), 60)["state"] == "completed"
        # A process that dies leaves its directory, unlocked; the next agent of that id
        # removes it, and leaves the live one's alone.
        localstack.stop_proc(one, signal.SIGKILL, timeout=5)
        assert (root / f"p{one.pid}").exists() and not held(root / f"p{one.pid}" / ".lock")
        three = start()
        assert sorted(root.iterdir()) == sorted([root / f"p{two.pid}", root / f"p{three.pid}"])
        # A clean stop removes its own.
        localstack.stop_proc(two, signal.SIGTERM, timeout=10)
        assert sorted(root.iterdir()) == [root / f"p{three.pid}"]
    finally:
        for p in started:
            localstack.stop_proc(p, signal.SIGKILL, timeout=5)
