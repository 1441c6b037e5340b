"""The fleet (issue 18): the agent registry, admission against what a pool can serve, the
local stack's targets, usage, and an elastic pool grown and shrunk for real."""

from __future__ import annotations

import json
import os
import platform
import signal
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues, work_queue_name
from agent.hostfacts import mount_facts
from benchctl import localstack
from benchctl.cli import main as benchctl
from benchctl.localstack import Stack
from core.errors import Forbidden, NotFound
from core.fleet.pools import parse_pools
from core.fleet.service import Fleet
from core.models.agents import Registration
from core.models.holder import AgentRef
from tables.fleet import vm_time
from tests.conftest import FLEET_POOL, run_body, wait_state, wait_until

# No figure here is held to a known load: the second fio lane (tests/lanes.py).
pytestmark = pytest.mark.fio_beside


def agents_of(api: httpx.Client, pool: str) -> dict[str, dict[str, Any]]:
    r = api.get("/api/agents", params={"pool": pool})
    assert r.status_code == 200, r.text
    return {a["id"]: a for a in r.json()["agents"]}


def start(stack: Stack, pool: str, name: str, mounts: dict[str, str]) -> localstack.Proc:
    return localstack.start_agent(stack, name, pool=pool, targets=mounts)


# ---- 1. the registry ---------------------------------------------------------------------


@pytest.mark.idle_agents  # they register, beat and stop: no fio, so not in the fio lane
def test_agents_register_heartbeat_and_go(
    stack: Stack, api: httpx.Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scratch = tmp_path / "scratch"
    share = tmp_path / "share"  # declared NFS, but a plain directory: not usable
    scratch.mkdir()
    share.mkdir()
    a = start(stack, FLEET_POOL, "reg-a", {"scratch": str(scratch), "vol1": f"{share},fstype=nfs"})
    b = start(stack, FLEET_POOL, "reg-b", {"scratch": str(scratch)})
    seen = wait_until(
        lambda: (
            (x := agents_of(api, FLEET_POOL)).get("agent-reg-a", {}).get("status") == "live"
            and x.get("agent-reg-b", {}).get("status") == "live"
            and x
        ),
        30,
        what="both agents registered",
    )
    one = seen["agent-reg-a"]
    assert one["pool"] == FLEET_POOL and one["state"] == "idle" and one["item_id"] is None
    assert one["engines"] == ["fio"]
    assert one["cpu_count"] == (os.cpu_count() or 0) and one["heartbeat_s"] == 2.0
    assert one["version"] == "0.1.0" and one["os"] and one["kernel"] == platform.release()
    mounts = {m["alias"]: m for m in one["mounts"]}
    here = mount_facts("scratch", str(scratch))  # what mountinfo says of the directory
    assert {k: mounts["scratch"][k] for k in ("fstype", "source", "options", "usable")} == {
        "fstype": here.fstype,
        "source": here.source,
        "options": here.options,
        "usable": True,
    }
    assert mounts["vol1"]["usable"] is False
    assert f"{share} is not a mount point" in mounts["vol1"]["problem"]

    # Heartbeats: last_seen moves on while the agent is idle, one beat per period.
    first = one["last_seen_ms"]
    wait_until(
        lambda: agents_of(api, FLEET_POOL)["agent-reg-a"]["last_seen_ms"] > first,
        10,
        what="a heartbeat",
    )

    # benchctl agents, as JSON and as a table.
    cli = ["--api-url", stack.api_url, "agents", "--pool", FLEET_POOL]
    assert benchctl([*cli, "--format", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {"agent-reg-a", "agent-reg-b"} <= {x["id"] for x in listed["agents"]}
    assert benchctl(cli) == 0
    table = capsys.readouterr().out
    assert "agent-reg-a" in table and "unusable" in table

    # SIGKILL: silent, then gone after three heartbeat periods (not before).
    localstack.stop_proc(b, signal.SIGKILL, timeout=5)
    gone = wait_until(
        lambda: (x := agents_of(api, FLEET_POOL)["agent-reg-b"])["status"] == "gone" and x,
        20,
        what="agent-reg-b gone",
    )
    assert time.time() * 1000 - gone["last_seen_ms"] > 3 * 2.0 * 1000
    # SIGTERM: it says it stops and is released at once.
    localstack.stop_proc(a, signal.SIGTERM, timeout=10)
    stopped = wait_until(
        lambda: (x := agents_of(api, FLEET_POOL)["agent-reg-a"])["status"] == "stopped" and x,
        10,
        what="agent-reg-a stopped",
    )
    assert stopped["released_ms"] is not None
    assert stopped["used_s"] == pytest.approx(
        (stopped["released_ms"] - stopped["registered_ms"]) / 1000, abs=0.002
    )


def test_only_the_agent_itself_may_register_its_id(store: CosmosStore) -> None:
    """A managed identity registers an agent id; another identity may not take it over."""
    fleet = Fleet(store.agents, parse_pools("default"))
    name = f"mi-{uuid.uuid4().hex[:8]}"
    reg = Registration(agent_id=name, pool="default", session=uuid.uuid4().hex)
    fleet.register(reg, AgentRef(name, principal="mi:1111"))
    with pytest.raises(Forbidden) as e:
        fleet.register(reg, AgentRef(name, principal="mi:2222"))
    assert e.value.errors[0].field == "agent_id"
    with pytest.raises(Forbidden):
        fleet.register(reg, AgentRef("someone-else", principal="mi:1111"))
    assert store.agents.get(name).principal == "mi:1111"
    with pytest.raises(NotFound):
        store.agents.get("someone-else")


# ---- 2. admission ------------------------------------------------------------------------


@pytest.mark.fio
def test_a_run_the_pool_cannot_serve_is_refused_naming_the_field(
    stack: Stack,
    api: httpx.Client,
    queues: WorkQueues,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    agent = start(stack, FLEET_POOL, "adm-1", {"scratch": str(scratch)})
    try:
        wait_until(
            lambda: agents_of(api, FLEET_POOL).get("agent-adm-1", {}).get("status") == "live",
            30,
            what="the agent registered",
        )
        tag = uuid.uuid4().hex
        body = {**run_body(FLEET_POOL), "tags": {"t": tag}}

        def refused(change: dict[str, Any]) -> list[dict[str, str]]:
            r = api.post("/api/runs", json={**body, **change})
            assert r.status_code == 400, r.text
            errors: list[dict[str, str]] = r.json()["errors"]
            return errors

        # "other" is in the target registry for this pool, but no agent mounts it.
        assert refused({"target": "other"}) == [
            {
                "field": "target",
                "message": f"no agent in pool {FLEET_POOL} mounts other; agents mount: scratch",
            }
        ]
        assert refused({"engine": "diskspd"}) == [
            {
                "field": "engine",
                "message": f"no agent in pool {FLEET_POOL} runs diskspd; agents run: fio",
            }
        ]
        [clients] = refused({"clients": 2})
        assert clients["field"] == "clients"
        assert clients["message"].startswith(f"2 clients at once, but pool {FLEET_POOL} has 1")
        [sweep] = refused({"clients": [1, 3]})  # every step must fit
        assert sweep["field"] == "clients"
        # Nothing was written or enqueued.
        assert api.get("/api/runs", params={"tag": f"t={tag}"}).json()["runs"] == []
        assert queues.peek_raw(work_queue_name(FLEET_POOL)) == []

        # What it can serve runs; the run says what client VM time it used.
        started = time.time()
        r = api.post("/api/runs", json=body)
        assert r.status_code == 202, r.text
        run = wait_state(api, r.json()["id"], ("completed", "failed"), timeout=60)
        assert run["state"] == "completed", run
        elapsed = time.time() - started
        usage = run["usage"]
        assert usage["items"] == 1 and usage["price_per_hour"] is None and usage["cost"] is None
        assert 2 <= usage["agent_s"] <= elapsed  # at least fio's 2 s runtime
        assert benchctl(["--api-url", stack.api_url, "show", run["id"]]) == 0
        shown = f"client VM time: {vm_time(usage['agent_s'])} over 1 client(s)"
        assert shown.startswith("client VM time: 0:00:") and shown in capsys.readouterr().out
    finally:
        localstack.stop_proc(agent, signal.SIGKILL, timeout=5)


# ---- 3 and 4: the local stack's targets, and an elastic pool grown and shrunk ------------

IDLE_S = 4
PRICE = 0.5


@pytest.fixture
def elastic_stack(tmp_path: Path) -> Iterator[Stack]:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    stack = localstack.up(
        agents=1,
        max_agents=4,
        idle_s=IDLE_S,
        price=PRICE,
        heartbeat_s=1.0,
        targets={"scratch": str(scratch)},
        directory=tmp_path / "stack",
        visibility_timeout=6,
        timer_seconds=0.5,
        fresh=True,
    )
    try:
        yield stack
    finally:
        localstack.down(tmp_path / "stack")


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


@pytest.mark.stack
@pytest.mark.fio
def test_an_elastic_pool_grows_for_a_run_and_shrinks_when_idle(
    elastic_stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = elastic_stack
    api = httpx.Client(base_url=stack.api_url, timeout=30)
    # 3. The stack's --target is in the target registry.
    listed = api.get("/api/targets").json()["targets"]
    assert [(t["alias"], t["pool"], t["busy"]) for t in listed] == [("scratch", "default", False)]
    wait_until(
        lambda: [a["status"] for a in api.get("/api/agents").json()["agents"]] == ["live"],
        30,
        what="the one agent registered",
    )

    # 4. A 4-client run on a pool with 1 live agent: provisioning, then grown to 4.
    body = run_body("default")
    body["clients"] = 4
    r = api.post("/api/runs", json=body)
    assert r.status_code == 202, r.text
    run_id = r.json()["id"]
    first = api.get(f"/api/runs/{run_id}").json()
    assert first["state"] == "provisioning", first
    held = first["provisioning"]
    assert held["needed"] == 4 and held["missing"] == 4 - held["live"] >= 1
    assert held["reason"].startswith("pool default is growing to 4 agents: ")
    run = wait_state(api, run_id, ("completed", "failed"), timeout=120)
    assert run["state"] == "completed", run
    assert len({i["agent_id"] for i in run["items"]}) == 4
    view = api.get("/api/agents").json()
    [pool] = view["pools"]
    assert pool["elastic"] and pool["size"] == 4 and pool["min"] == 1
    assert pool["capacity"] == 4 and pool["live"] == 4

    # ... and back to 1 after the idle period (not before it).
    ended = max(_ms(i["ended_at"]) for i in run["items"])
    view = wait_until(
        lambda: (
            (v := api.get("/api/agents").json())["pools"][0]["live"] == 1
            and v["pools"][0]["capacity"] == 1
            and v
        ),
        IDLE_S + 30,
        what="the pool back to 1 agent",
    )
    states = sorted(a["status"] for a in view["agents"])
    assert states == ["live", "stopped", "stopped", "stopped"]
    assert next(a for a in view["agents"] if a["status"] == "live")["id"] == "agent-1"
    for a in view["agents"]:
        if a["status"] == "stopped":
            assert a["released_ms"] - ended >= IDLE_S * 1000

    # 5. Usage and cost: the run's (items held) and the pool's (registration to release).
    usage = run["usage"]
    held_s = sum(_ms(i["ended_at"]) - _ms(i["claimed_at"]) for i in run["items"]) / 1000
    assert usage["agent_s"] == pytest.approx(held_s, abs=0.01) and usage["items"] == 4
    assert usage["cost"] == pytest.approx(usage["agent_s"] / 3600 * PRICE, abs=1e-6)
    pool = view["pools"][0]
    assert pool["used_s"] == pytest.approx(sum(a["used_s"] for a in view["agents"]), abs=0.01)
    assert pool["cost"] == pytest.approx(pool["used_s"] / 3600 * PRICE, abs=1e-5)
    assert benchctl(["--api-url", stack.api_url, "show", run_id]) == 0
    assert f"cost {usage['cost']:.4f} at 0.5 per VM-hour" in capsys.readouterr().out
