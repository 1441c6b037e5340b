"""Chaos: during one 2-client run, SIGKILL in turn an agent, the API, Azurite and the
Cosmos DB server, restarting each (but the agent), on a stack of the test's own (real
processes, real fio). The run must end completed or failed with a reason, with at most one
result per client, its target free again and no fio left running. Twice: with one API
process, and with 3 instances behind nginx (`--api-instances 3`), of which the one killed
is the timers' lease holder at that moment (the others serve on and one takes the timers
over)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.cosmos import CosmosStore
from benchctl import localstack
from benchctl.local_balancer import TIMER_LEASE_S
from benchctl.localstack import Proc, Stack
from tests.conftest import wait_until

# No figure here is held to a known load: the second fio lane (tests/lanes.py).
pytestmark = [pytest.mark.stack, pytest.mark.fio, pytest.mark.fio_beside]

RUNTIME_S = 24


@pytest.fixture(params=[1, 3], ids=["1-instance", "3-instances"])
def own_stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    stack = localstack.up(
        agents=3,
        targets={"scratch": str(scratch)},
        directory=tmp_path / "stack",
        # Longer than an emulator's kill and restart (a few seconds, more on a loaded
        # machine): an agent that cannot renew its lease until the visibility runs out
        # must stop (another agent may have its message), which is not what this test is
        # about; 6 s made the surviving client's outcome depend on restart time.
        visibility_timeout=15,
        timer_seconds=0.5,
        fresh=True,
        api_instances=request.param,
    )
    try:
        yield stack
    finally:
        localstack.down(tmp_path / "stack")


def alive(stack: Stack, name: str) -> Proc:
    return next(p for p in reversed(stack.procs) if p.name == name and p.alive())


def kill(proc: Proc) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    localstack.stop_proc(proc, signal.SIGKILL, timeout=10)
    assert not proc.alive()


def kill_and_restart_the_api(stack: Stack) -> None:
    """SIGKILL the API process (with 3 instances, the one ticking the timers: the last to
    log a tick), wait, and start it again (on its port, behind nginx)."""
    if stack.api_instances <= 1:
        kill(alive(stack, "api"))
        time.sleep(3)
        localstack.start_api(stack, timer_seconds=0.5)
        return
    instances = [p for p in stack.procs if p.name.startswith("api-") and p.alive()]
    victim = max(instances, key=last_tick)
    kill(victim)
    time.sleep(3)
    lease = {"BENCH_LOCAL_TIMER_LEASE_S": str(TIMER_LEASE_S)}
    localstack.start_api(stack, 0.5, lease, name=victim.name, port=victim.port)


def last_tick(p: Proc) -> str:
    """The stamp of the instance's last timer tick in its log ("" if none)."""
    lines = Path(p.log).read_text(errors="replace").splitlines()
    return max((line[:23] for line in lines if line.endswith("timer tick")), default="")


def fio_processes(root: Path) -> list[int]:
    """fio processes whose command line names a file under ``root``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"fio") and any(str(root).encode() in a for a in argv):
            found.append(int(cmdline.parent.name))
    return found


def run_of(api: httpx.Client, run_id: str) -> dict[str, Any]:
    """The run, asked until the API answers (it is killed and restarted during the test)."""

    def ask() -> dict[str, Any] | None:
        try:
            r = api.get(f"/api/runs/{run_id}")
        except httpx.HTTPError:
            return None
        return r.json() if r.status_code == 200 else None

    got: dict[str, Any] = wait_until(ask, 60, what="the API to answer")
    return got


def test_a_run_survives_killed_agent_api_azurite_and_cosmos(
    own_stack: Stack, tmp_path: Path
) -> None:
    stack = own_stack
    api = httpx.Client(base_url=stack.api_url, timeout=10)
    body: dict[str, Any] = {
        "target": "scratch",
        "clients": 2,
        "workload": {
            "rw": "randread",
            "bs": "4k",
            "size": "8m",
            "iodepth": 4,
            "runtime": RUNTIME_S,
        },
    }
    posted = api.post("/api/runs", json=body)
    assert posted.status_code == 202, posted.text
    run_id = posted.json()["id"]
    run = wait_until(
        lambda: (
            (r := run_of(api, run_id)) and all(i["state"] == "running" for i in r["items"]) and r
        ),
        60,
        what="both clients running",
    )
    holders = {i["agent_id"] for i in run["items"]}

    # An agent dies in the middle of its fio (never restarted: its client cannot rejoin).
    victim = next(a for a in stack.agents() if a.name in holders)
    kill(victim)
    time.sleep(2)
    # The API, Azurite (queue and blob) and the Cosmos DB server, each down a few seconds.
    kill_and_restart_the_api(stack)
    time.sleep(2)
    kill(alive(stack, "azurite"))
    kill(alive(stack, "azurite-blob"))
    time.sleep(3)
    localstack.start_azurite(stack)
    time.sleep(2)
    kill(alive(stack, "cosmosdb"))
    time.sleep(3)
    localstack.start_cosmos(stack)

    def ended() -> dict[str, Any] | None:
        r = run_of(api, run_id)
        return r if r["state"] in ("completed", "failed", "cancelled") else None

    run = wait_until(ended, RUNTIME_S + 120, what="the run to end")
    assert run["state"] in ("completed", "failed")
    if run["state"] == "failed":
        assert run["error"], run  # failed with a reason
    store = CosmosStore.from_settings(stack.settings())
    results = store.results.of_run(run_id)
    per_client = [sum(1 for r in results if r.client == c) for c in (0, 1)]
    assert max(per_client) <= 1, per_client  # nothing stored twice
    survivor = next(i for i in run["items"] if i["agent_id"] != victim.name)
    why = (run.get("error"), [(i["client"], i["state"], i.get("agent_id")) for i in run["items"]])
    assert survivor["state"] == "completed" and per_client[survivor["client"]] == 1, why
    if run["state"] == "completed":  # one result per client, the redelivered one too
        assert per_client == [1, 1], per_client
    else:  # the killed client's item failed, saying why
        lost = next(i for i in run["items"] if i["client"] != survivor["client"])
        assert lost["state"] != "completed" and (lost["errors"] or lost["reason"]), lost
    print("run", run["state"], run["error"], [(i["client"], i["state"]) for i in run["items"]])

    # No fio of the run is left running, and the target is free: the next run is admitted.
    wait_until(lambda: not fio_processes(tmp_path), 15, what="no fio left running")
    nxt = api.post(
        "/api/runs", json={**body, "clients": 1, "workload": {**body["workload"], "runtime": 1}}
    )
    assert nxt.status_code == 202 and nxt.json()["state"] != "waiting", nxt.text
