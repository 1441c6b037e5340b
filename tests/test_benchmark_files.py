"""What a run writes on a target is removed when it ends, failed, cancelled or crashed
(issue 24, point 3): a cancelled metadata run's tree at once, what a killed agent left
before the next run on that target, and nothing of another pool's or target's runs. Real
agents (one killed with SIGKILL), real fio, the real stack. (A phase that fails for good:
tests/test_agent_crash_only.py.)"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import httpx

from benchctl import localstack
from tests.conftest import AgentFactory, run_body, wait_state, wait_until
from tests.test_e2e import children

LONG_STAT = {
    "target": "scratch",
    "workload": {
        "numjobs": 1,
        "runtime": 30,  # the stat phase's: it is cut short by the cancel or the kill
        "metadata": {"ops": ["create", "stat", "delete"], "files_per_dir": 50},
    },
}


def files_of(run_id: str, mount: Path) -> list[Path]:
    return [p for p in mount.rglob("*") if run_id in str(p) and not p.is_dir()]


def in_stat_phase(api: httpx.Client, pool: str, agent_pid: int) -> str:
    run_id: str = api.post("/api/runs", json={**LONG_STAT, "pool": pool}).json()["id"]

    def stat_running() -> bool:
        items = api.get(f"/api/runs/{run_id}").json()["items"]
        return any(i["step"] == 1 and i["state"] == "running" for i in items)

    wait_until(stat_running, 30, what="the stat phase running")
    wait_until(lambda: children(agent_pid), 10, what="fio")
    return run_id


def plant_tree(mount: Path, pool: str, alias: str) -> Path:
    """Another run's tree as an agent leaves it: its files, then the run's directory."""
    run = mount / ".benchsvc" / f"md-{pool}.{alias}" / f"r-{'0' * 32}"
    (run / "c0" / "j0").mkdir(parents=True)
    for n in range(3):
        (run / "c0" / "j0" / f"f{n}").write_bytes(b"")
    return run


def test_a_cancelled_metadata_run_leaves_nothing(
    api: httpx.Client, agents: AgentFactory, pool: str, scratch: Path
) -> None:
    agent = agents()
    run_id = in_stat_phase(api, pool, agent.pid)
    assert len(files_of(run_id, scratch)) == 50
    api.delete(f"/api/runs/{run_id}")
    wait_state(api, run_id, ("cancelled",))
    wait_until(lambda: not files_of(run_id, scratch), 10, what="the tree removed")
    assert agent.alive()


def test_what_a_killed_agent_left_is_removed_before_the_next_run_there(
    api: httpx.Client, agents: AgentFactory, pool: str, scratch: Path, tmp_path: Path
) -> None:
    killed = agents()
    crashed = in_stat_phase(api, pool, killed.pid)
    localstack.stop_proc(killed, signal.SIGKILL, timeout=5)
    api.delete(f"/api/runs/{crashed}")
    assert len(files_of(crashed, scratch)) == 50, "nobody was left to remove it"
    # Trees of another pool's run and of another target's (the same directory mounted
    # under two aliases) are not this target lock's: they stay.
    elsewhere = [plant_tree(scratch, "elsewhere", "scratch"), plant_tree(scratch, pool, "other")]
    agents()  # drops the crashed run's redelivered item; then runs the next run
    nxt: dict[str, Any] = api.post("/api/runs", json=run_body(pool, size="2m")).json()
    assert wait_state(api, nxt["id"], ("completed", "failed"))["state"] == "completed"
    assert files_of(crashed, scratch) == []
    assert not list((scratch / ".benchsvc" / f"md-{pool}.scratch").iterdir())
    assert all(len(list(t.rglob("f*"))) == 3 for t in elsewhere)
