"""The agent protocol under real faults: the API killed (SIGKILL) and restarted while agents
wait at the barrier, run fio or put their result, and while benchctl follows a run; a run
that disappears under a running agent. Real API processes, Azurite, the Cosmos DB server,
agents and fio.

Where an outage must hit one client and not another, that client talks to a second API
process on the same emulators and only that process is killed: with a single API, the
other client could not complete the barrier during the outage either."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.cosmos import CosmosStore
from benchctl import localstack
from benchctl.localstack import Proc, Stack
from core.runs.barrier import ready_count
from tests.conftest import AgentFactory, run_body, wait_state, wait_until
from tests.second_api import SecondApi
from tests.test_e2e import alive, children

# No figure here is held to a known load: the second fio lane (tests/lanes.py).
pytestmark = pytest.mark.fio_beside


@pytest.fixture
def api2(stack: Stack, tmp_path: Path) -> Iterator[SecondApi]:
    second = SecondApi(stack, tmp_path / "api2").start()
    yield second
    second.kill()


@pytest.fixture
def own_agents(pool: str, tmp_path: Path) -> Iterator[Any]:
    """Agents of this test's pool, each with its own directory, on the API it is given."""
    started: list[Proc] = []

    def start(st: Stack, name: str) -> Proc:
        scratch = tmp_path / name
        scratch.mkdir()
        targets = {"scratch": str(scratch)}
        p = localstack.start_agent(st, f"{pool}-{name}", pool=pool, targets=targets)
        started.append(p)
        return p

    yield start
    for p in started:
        localstack.stop_proc(p, signal.SIGKILL, timeout=5)


def items(store: CosmosStore, run_id: str) -> list[dict[str, Any]]:
    return [i.doc() for i in store.items.of_run(run_id)[1]]


@pytest.mark.fio
def test_a_client_hearing_go_after_an_outage_gets_an_instant_of_its_own(
    stack: Stack, api: httpx.Client, store: CosmosStore, api2: SecondApi, own_agents: Any, pool: str
) -> None:
    """Issue 11.9. Client B is ready and waits at the barrier through API2; API2 is killed;
    client A, through the session's API, completes the barrier and starts. B hears "go"
    only when API2 is back, seconds after the step's instant (its calls are retried, its
    lease held meanwhile). Told the old instant it would start at once, far from the others.
    It gets an instant of its own, recorded on its item; the step's instant stays."""
    b = own_agents(api2.stack, "b")
    body = {**run_body(pool, runtime=3), "clients": 2}
    run_id = api.post("/api/runs", json=body).json()["id"]

    def b_ready() -> dict[str, Any] | None:
        # Ready at the barrier once its shard holds it: the item says "ready" a write
        # earlier, and API2 killed between the two writes would leave B to join only when
        # API2 is back, which this test waits on A's start for (CI saw that deadlock).
        if ready_count(store, store.items.get_step(run_id, 0)) != 1:
            return None
        return next((d for d in items(store, run_id) if d["state"] == "ready"), None)

    b_item = wait_until(b_ready, 60, what="client B ready at the barrier")
    assert b_item["agent_id"] == b.name
    api2.kill()
    a = own_agents(stack, "a")
    common = wait_until(lambda: store.items.get_step(run_id, 0).start_at_ms, 60, what="A starts")
    # Down until the instant is 3 s past (A is running fio by then), then back.
    time.sleep(max(0.0, common / 1000 + 3 - time.time()))
    restarted_ms = time.time() * 1000
    api2.start()

    run = wait_state(api, run_id, ("completed", "failed"), timeout=120)
    results = {r.agent_id: r.model_dump(mode="json") for r in store.results.of_run(run_id)}
    print(
        "step instant",
        common,
        {
            who: (r["start"]["scheduled_ms"] - common, r["start"]["skew_ms"])
            for who, r in results.items()
        },
    )
    assert [i["state"] for i in run["items"]] == ["completed", "completed"], run
    assert store.items.get_step(run_id, 0).start_at_ms == common  # the step's instant
    b_doc = store.items.get_item(run_id, b_item["id"]).doc()
    own = b_doc["start_at_ms"]
    note = b_doc["rebarriered"]
    assert note["step_start_at_ms"] == common and note["start_at_ms"] == own
    assert note["late_ms"] >= 3000 and own >= restarted_ms
    assert results[a.name]["start"]["scheduled_ms"] == common
    started_b = results[b.name]["start"]
    assert started_b["scheduled_ms"] == own  # not the past instant
    assert -2 <= started_b["skew_ms"] < 1000  # measured from its own instant
    public = next(i for i in run["items"] if i["id"] == b_item["id"])
    assert public["start_at_ms"] == own and public["rebarriered"] == note
    # The aggregation sees B started seconds from the common instant: left out, named.
    agg = run["aggregate"]
    assert agg["partial"] is True and agg["clients"] == 1
    [late] = agg["failed_clients"]
    assert late["agent_id"] == b.name and "from the step's common instant" in late["error"]


@pytest.mark.fio
def test_a_result_put_during_an_api_outage_is_retried_not_redone(
    api: httpx.Client, store: CosmosStore, api2: SecondApi, own_agents: Any, pool: str
) -> None:
    """Issue 12.9. The API is killed while fio runs and stays down for longer than the
    message's visibility timeout (6 s) after fio has ended: the agent retries its PUT
    (holding the lease meanwhile) until the API is back. One fio run, one result."""
    agent = own_agents(api2.stack, "solo")
    run_id = api.post("/api/runs", json=run_body(pool, runtime=4)).json()["id"]
    wait_until(lambda: items(store, run_id)[0]["state"] == "running", 60, what="running")
    fio = wait_until(lambda: children(agent.pid), 10, what="fio to start")
    api2.kill()
    killed_ms = time.time() * 1000
    wait_until(lambda: not any(alive(p) for p in fio), 30, what="fio to end")
    time.sleep(8)  # the agent is retrying its PUT all this while
    api2.start()

    run = wait_state(api, run_id, ("completed", "failed"), timeout=120)
    assert run["state"] == "completed", run
    [item] = run["items"]
    assert item["attempts"] == 1 and item["agent_id"] == agent.name  # not redone
    [result] = store.results.of_run(run_id)
    assert result.started_at_ms < killed_ms  # the run fio made before the outage
    assert "retry" in localstack.tail(agent.log, 200)


def test_benchctl_wait_follows_a_run_across_an_api_restart(
    api: httpx.Client, api2: SecondApi, agents: AgentFactory, pool: str
) -> None:
    """benchctl follows through API2, killed and restarted mid-run; the agent works through
    the session's API, so the run carries on meanwhile. benchctl ends with the run, exit 0."""
    agents()
    argv = [sys.executable, "-m", "benchctl", "--api-url", api2.url, "run", "--pool", pool]
    argv += ["--target", "scratch", "--runtime", "4", "--size", "8m", "--tag", f"restart={pool}"]
    argv += ["--wait", "--timeout", "120", "--format", "json"]
    follow = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:

        def running() -> bool:
            runs = api.get("/api/runs", params={"tag": f"restart={pool}"}).json()["runs"]
            return bool(runs) and runs[0]["state"] == "running"

        wait_until(running, 60, what="the run to start")
        api2.kill()
        time.sleep(5)
        api2.start()
        out, err = follow.communicate(timeout=150)
    finally:
        follow.kill()
    assert follow.returncode == 0, err
    assert json.loads(out)["state"] == "completed"
    assert "retrying" in err


@pytest.mark.parametrize("fault", ["run deleted", "item taken over"])
def test_an_agent_stops_fio_when_its_item_is_gone_or_not_its_own(
    api: httpx.Client, store: CosmosStore, agents: AgentFactory, pool: str, fault: str
) -> None:
    """Issue 12.3: the heartbeat answers 404 (the run is gone) or 409 (another agent holds
    the item): the agent stops fio and writes nothing."""
    agent = agents()
    run_id = api.post("/api/runs", json=run_body(pool, runtime=60)).json()["id"]
    wait_until(lambda: items(store, run_id)[0]["state"] == "running", 60, what="running")
    fio = wait_until(lambda: children(agent.pid), 10, what="fio to start")
    if fault == "run deleted":
        # With its steps and items (its partition of the items container): the heartbeat
        # reads only the item (issue 29.3); a run document removed alone, which nothing in
        # the service does, is noticed at the next recorded sign of life (30 s).
        store.container("runs").delete(run_id, run_id)
        steps, its_items = store.items.of_run(run_id)
        for part in [s.id for s in steps] + [i.id for i in its_items]:
            store.container("items").delete(part, run_id)
    else:
        doc = store.items.of_run(run_id)[1][0]
        doc.agent_id = "someone-else"
        store.items.replace_item(doc)
    stopped = time.monotonic()
    wait_until(lambda: not any(alive(p) for p in fio), 15, what="fio to stop")
    took = time.monotonic() - stopped
    print(f"{fault}: fio stopped {took:.1f} s after")
    assert took < 10  # a heartbeat or two, not the 60 s run
    assert store.results.of_run(run_id) == []
