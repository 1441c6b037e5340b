"""A local stack of 3 API instances behind nginx (`benchctl local up --api-instances 3`):
the API answers through the balancer alone and runs a 2-client fio run end to end; exactly
one instance runs the timers at a time (the holder of the timers' blob lease); and when the
holder is SIGKILLed another takes over once the lease expires, within its duration and one
tick. Each instance's log has a line per tick it ran (benchctl.local_api)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from adapters.cosmos import CosmosStore
from benchctl import localstack
from benchctl.local_balancer import TIMER_LEASE_S
from benchctl.localstack import Proc, Stack
from tests.conftest import run_body, wait_state, wait_until

pytestmark = [pytest.mark.stack, pytest.mark.fio]

INSTANCES = 3
TICK_S = 0.5
# What the lease allows: it expires TIMER_LEASE_S after the dead holder's last renewal (just
# before its last tick), another instance asks within a tick, and its acquire is one
# Storage call (bounded_client_options: it answers within a second here, or not at all).
TAKEOVER_BOUND_S = TIMER_LEASE_S + TICK_S + 1.0


@pytest.fixture(scope="module")
def multi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    localstack.ensure_installed()
    base = tmp_path_factory.mktemp("multi")
    scratch = base / "scratch"
    stack = localstack.up(
        agents=4,
        targets={"scratch": str(scratch)},
        directory=base / "stack",
        visibility_timeout=6,
        timer_seconds=TICK_S,
        heartbeat_s=2.0,
        api_instances=INSTANCES,
    )
    try:
        yield stack
    finally:
        localstack.down(Path(stack.dir))
        left = [p.name for p in stack.procs if p.alive()]
        assert not left, f"still running after down: {left}"


def instances(stack: Stack) -> list[Proc]:
    return sorted((p for p in stack.procs if p.name.startswith("api-")), key=lambda p: p.name)


def ticks(p: Proc) -> list[float]:
    """The instants (Unix s) of the ticks the instance ran, from its log."""
    out = []
    for line in Path(p.log).read_text(errors="replace").splitlines():
        if line.endswith("functions.timers timer tick"):
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            out.append(stamp.timestamp())
    return out


def test_the_api_answers_through_nginx_and_runs_a_2_client_fio_run(multi: Stack) -> None:
    names = [p.name for p in multi.procs]
    assert names.count("nginx") == 1 and len(instances(multi)) == INSTANCES
    balancer = next(p for p in multi.procs if p.name == "nginx")
    assert balancer.port == multi.api_port
    assert all(p.port != multi.api_port for p in instances(multi))  # private ports
    with httpx.Client(base_url=multi.api_url, timeout=30) as api:
        assert api.get("/api/health").json()["status"] == "ok"
        body = run_body("default", runtime=2)
        body["clients"] = 2
        posted = api.post("/api/runs", json=body)
        assert posted.status_code == 202, posted.text
        run = wait_state(api, posted.json()["id"], ("completed", "failed"), timeout=120)
    assert run["state"] == "completed", run["error"]
    store = CosmosStore.from_settings(multi.settings())
    results = store.results.of_run(run["id"])
    assert len(results) == 2  # one per client
    assert len({i["agent_id"] for i in run["items"]}) == 2  # two distinct agents
    assert run["aggregate"]["clients"] == 2 and not run["aggregate"]["partial"]


def test_exactly_one_instance_ticks_at_a_time(multi: Stack) -> None:
    procs = instances(multi)
    wait_until(lambda: any(ticks(p) for p in procs), 30, what="a first tick")
    since = time.time()
    time.sleep(4)
    recent = {p.name: [t for t in ticks(p) if t >= since] for p in procs}
    ticking = [name for name, ts in recent.items() if ts]
    assert len(ticking) == 1, recent
    # It ticked on its schedule (every TICK_S, plus the tick's own work), not once.
    assert len(recent[ticking[0]]) >= 3, recent


def test_another_instance_takes_over_when_the_holder_is_killed(multi: Stack) -> None:
    procs = instances(multi)
    wait_until(lambda: any(ticks(p) for p in procs), 30, what="a first tick")
    holder = max(procs, key=lambda p: max(ticks(p), default=0.0))
    localstack.stop_proc(holder, signal.SIGKILL, timeout=5)
    last = max(ticks(holder))
    others = [p for p in procs if p is not holder]

    def first_new_tick() -> float | None:
        later = [t for p in others for t in ticks(p) if t > last]
        return min(later) if later else None

    taken = wait_until(first_new_tick, TAKEOVER_BOUND_S + 10, what="another instance to tick")
    gap = taken - last
    print(f"takeover: {gap:.2f} s after the killed holder's last tick")
    # Nobody ticked while the dead holder's lease ran, and the next one took it promptly.
    assert TIMER_LEASE_S - 1.0 <= gap <= TAKEOVER_BOUND_S, gap
    # One new holder only.
    time.sleep(2)
    new = [p.name for p in others if any(t > last for t in ticks(p))]
    assert len(new) == 1, new
    with httpx.Client(base_url=multi.api_url, timeout=30) as api:  # still served
        assert api.get("/api/health").status_code == 200


def test_a_4_client_step_completes_when_an_instance_is_killed_in_its_middle(
    multi: Stack,
) -> None:
    with httpx.Client(base_url=multi.api_url, timeout=30) as api:
        body = run_body("default", runtime=4)
        body["clients"] = 4
        posted = api.post("/api/runs", json=body)
        assert posted.status_code == 202, posted.text
        run_id = posted.json()["id"]
        wait_state(api, run_id, ("running",), timeout=60)
        # An instance still serving (the takeover test may have killed one): the agents'
        # heartbeats, barrier polls and results now land on the others.
        victim = next(p for p in instances(multi) if p.alive())
        localstack.stop_proc(victim, signal.SIGKILL, timeout=5)
        run = wait_state(api, run_id, ("completed", "failed"), timeout=120)
    assert run["state"] == "completed", run["error"]
    results = CosmosStore.from_settings(multi.settings()).results.of_run(run_id)
    assert len(results) == 4 and len({r.agent_id for r in results}) == 4
    assert len({i["agent_id"] for i in run["items"]}) == 4
