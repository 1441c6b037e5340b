"""What a run writes on a target is removed when it ends, failed, cancelled or crashed
(issue 24, point 3): a cancelled metadata run's tree at once, what a killed agent left
before the next run on that target, and nothing of another pool's or target's runs; and
``benchctl clean TARGET`` has an agent remove all of it on demand. Real agents (one killed
with SIGKILL), real fio, the real stack. (A phase that fails for good:
tests/test_agent_crash_only.py.)"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from agent.cleanup import clean_target
from benchctl import localstack
from benchctl.localstack import Stack
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
    """The run's files under ``mount``, while the agent may be removing them: os.walk skips
    a directory gone between its listing and its own (Path.rglob raised FileNotFoundError
    there, a CI rehearsal 2026-11-28 00:41 UTC)."""
    return [
        Path(d, f) for d, _, names in os.walk(mount) for f in names if run_id in os.path.join(d, f)
    ]


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


def test_benchctl_clean_has_an_agent_remove_the_targets_benchmark_files(
    stack: Stack, api: httpx.Client, agents: AgentFactory, pool: str, scratch: Path
) -> None:
    agent = agents()
    done = wait_state(
        api,
        api.post("/api/runs", json=run_body(pool, size="2m")).json()["id"],
        ("completed", "failed"),
    )
    assert done["state"] == "completed"
    kept = list((scratch / ".benchsvc" / agent.name).iterdir())
    assert kept, "the working set is kept for the next run"
    left = plant_tree(scratch, "elsewhere", "scratch")  # a crashed agent's, of another pool
    # While a run holds the target its files are in use: refused, naming the run.
    holder = api.post("/api/runs", json=run_body(pool, size="2m", runtime=1)).json()["id"]
    busy = api.post("/api/targets/scratch/clean", json={"pool": pool})
    assert busy.status_code == 409
    assert busy.json()["errors"][0]["message"].startswith(f"run {holder} holds target scratch")
    wait_state(api, holder, ("completed", "failed"))
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchctl",
            "--api-url",
            stack.api_url,
            "clean",
            "scratch",
            "--pool",
            pool,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert cli.returncode == 0, cli.stderr
    order = cli.stdout.split(":")[0]
    assert re.fullmatch(r"c-[0-9a-f]{32}", order), cli.stdout
    wait_until(lambda: not (scratch / ".benchsvc").exists(), 15, what="the files removed")
    assert not left.exists()
    said = wait_until(
        lambda: [x for x in Path(agent.log).read_text().splitlines() if order in x],
        5,
        what="the agent's log",
    )
    print(said[0])
    assert "removed" in said[0] and f"under {scratch}/.benchsvc" in said[0], said
    assert agent.alive()


def test_clean_refuses_what_it_cannot_clean(api: httpx.Client, pool: str) -> None:
    def error(alias: str, **body: str) -> tuple[int, str, str]:
        r = api.post(f"/api/targets/{alias}/clean", json=body)
        e = r.json()["errors"][0]
        return r.status_code, e["field"], e["message"]

    assert error("nosuch", pool=pool) == (
        404,
        "(path)",
        f"not found: no target nosuch in pool {pool}",
    )
    assert error("golden", pool=pool) == (
        400,
        "alias",
        "target golden is read-only: agents never write there",
    )
    status, field, message = error("scratch")  # every test pool has one
    assert (status, field) == (400, "pool") and message.startswith("target scratch is in pools ")
    assert error("Bad!", pool=pool)[:2] == (400, "alias")
    assert error("scratch", pool="Bad!")[:2] == (400, "pool")


def test_clean_removes_only_what_changed_before_the_order(tmp_path: Path) -> None:
    old = tmp_path / ".benchsvc" / "agent-1" / "scratch.0.0"
    new = tmp_path / ".benchsvc" / "md-p.scratch" / f"r-{'1' * 32}" / "c0" / "j0" / "f0"
    for f in (old, new):
        f.parent.mkdir(parents=True)
        f.write_bytes(b"\1" * 8192)
    order_ms = 1_700_000_000_000
    os.utime(old, ns=((order_ms - 1) * 1_000_000,) * 2)
    os.utime(new, ns=((order_ms + 1) * 1_000_000,) * 2)
    done = clean_target(tmp_path, order_ms)
    assert (done.files, done.bytes, done.kept, done.failed) == (1, 8192, 1, 0)
    assert not old.exists() and not old.parent.exists() and new.exists()
