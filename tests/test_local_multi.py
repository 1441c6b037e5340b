"""A local stack of 3 API instances behind nginx (`benchctl local up --api-instances 3`),
one stack for the whole module:
- the API answers through the balancer alone and runs a 2-client fio run end to end, its
  results checked as the single-instance core path checks them (tests/test_e2e.py);
- exactly one instance runs the timers at a time (the holder of the timers' blob lease),
  and when the holder is SIGKILLed another takes over once the lease expires, within its
  duration and one tick (each instance's log has a line per tick it ran);
- an instance SIGKILLed in the middle of a 4-client step: the step completes, one result
  per client;
- held barrier calls (issue 29.3) spread over the instances by nginx all hear the start
  instant a ready report made outside every instance sets, before it, from each instance's
  own reads of the step (tests/test_barrier_hold.py); the real agents' step waits in them;
- 40 concurrent POSTs on 30 Idempotency-Keys to one target give exactly 30 runs, admitted
  one at a time, all completed (simulated clients, ``benchctl.local_sim``: the subject is
  admission, not fio).

Lanes: the stack starts no agent; the tests that run fio start the module's agents
(``fio_agents``) and are marked ``fio``; the others run in the ``stack`` lane, beside the
fio lane in `make test`. Each test starts with the 3 instances alive (``three_alive``
restarts one a test killed, on its port)."""

from __future__ import annotations

import itertools
import json
import signal
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues
from benchctl import localstack
from benchctl.local_balancer import TIMER_LEASE_S
from benchctl.local_sim import SIM_POOL, sim_pool_spec, start_sim_agents
from benchctl.local_state import free_port, remember_port
from benchctl.localstack import Proc, Stack
from core.models.barrier_shard import shard_count, shard_id
from core.models.ids import run_id_for_key
from core.runs.service import RunService
from tests.conftest import run_body, wait_state, wait_until
from tests.test_barrier_hold import check_held_step
from tests.test_e2e import check_stored_result

# Its fio tests hold no figure to a known load: the second fio lane (tests/lanes.py).
pytestmark = [pytest.mark.stack, pytest.mark.fio_beside]

INSTANCES = 3
TICK_S = 0.5
AGENTS = 4
SIMS = 3  # simulated clients (pool "sim"), for the admission test
POOLS = f"default:size={AGENTS},{sim_pool_spec(SIMS)}"
# What the lease allows: it expires TIMER_LEASE_S after the dead holder's last renewal (just
# before its last tick), another instance asks within a tick, and its acquire is one
# Storage call (bounded_client_options: it answers within a second here, or not at all).
TAKEOVER_BOUND_S = TIMER_LEASE_S + TICK_S + 1.0


def api_env() -> dict[str, str]:
    """What every instance is started with beyond the stack's own settings (a revived
    one too): the pools' sizes (their clients start after the API), the scratch target in
    each, and the timers' lease."""
    targets = [{"alias": "scratch", "pool": p} for p in ("default", SIM_POOL)]
    return {
        "BENCH_POOLS": POOLS,
        "BENCH_TARGETS": json.dumps(targets),
        "BENCH_LOCAL_TIMER_LEASE_S": str(TIMER_LEASE_S),
    }


@pytest.fixture(scope="module")
def multi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    localstack.ensure_installed()
    base = tmp_path_factory.mktemp("multi")
    # Not 7071: other stacks on this machine start there too.
    remember_port(base / "stack", free_port())
    stack = localstack.up(
        agents=0,
        targets={"scratch": str(base / "scratch")},
        directory=base / "stack",
        visibility_timeout=6,
        timer_seconds=TICK_S,
        heartbeat_s=2.0,
        api_instances=INSTANCES,
        api_env=api_env(),
    )
    try:
        yield stack
    finally:
        localstack.down(Path(stack.dir))
        left = [p.name for p in stack.procs if p.alive()]
        assert not left, f"still running after down: {left}"


@pytest.fixture(scope="module")
def fio_agents(multi: Stack) -> list[Proc]:
    """The module's agents (real fio), started by the first fio test; stopped with the stack."""
    procs = [localstack.start_agent(multi, i) for i in range(1, AGENTS + 1)]
    with httpx.Client(base_url=multi.api_url, timeout=30) as api:

        def registered() -> bool:
            pools = api.get("/api/agents", params={"pool": "default"}).json()["pools"]
            return bool(pools[0]["live"] >= AGENTS)

        wait_until(registered, 60, what=f"{AGENTS} agents registered")
    return procs


def instances(stack: Stack) -> list[Proc]:
    """The instances now serving, one per name (a revived one replaces the dead)."""
    latest = {p.name: p for p in stack.procs if p.name.startswith("api-")}
    return sorted(latest.values(), key=lambda p: p.name)


@pytest.fixture(autouse=True)
def three_alive(multi: Stack) -> None:
    """Every test starts with the 3 instances serving: one a test killed starts again on
    its port (nginx takes it back after its 2 s fail timeout)."""
    dead = [p for p in instances(multi) if not p.alive()]
    for p in dead:
        localstack.start_api(multi, TICK_S, api_env(), name=p.name, port=p.port, wait=False)
    for p in instances(multi):
        localstack.wait_api(p)
    if dead:
        time.sleep(2)  # nginx's fail_timeout: the revived instance gets requests again


def ticks(p: Proc) -> list[float]:
    """The instants (Unix s) of the ticks the instance ran, from its log (a revived
    instance's log goes on in the same file)."""
    out = []
    for line in Path(p.log).read_text(errors="replace").splitlines():
        if line.endswith("functions.timers timer tick"):
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            out.append(stamp.timestamp())
    return out


def test_exactly_one_instance_ticks_at_a_time(multi: Stack) -> None:
    procs = instances(multi)
    wait_until(lambda: any(ticks(p) for p in procs), 30, what="a first tick")
    since = time.time()
    time.sleep(3)
    recent = {p.name: [t for t in ticks(p) if t >= since] for p in procs}
    ticking = [name for name, ts in recent.items() if ts]
    assert len(ticking) == 1, recent
    # It ticked on its schedule (every TICK_S, plus the tick's own work), not once.
    assert len(recent[ticking[0]]) >= 3, recent


@pytest.mark.fio
def test_the_api_answers_through_nginx_and_runs_a_2_client_fio_run(
    multi: Stack, fio_agents: list[Proc]
) -> None:
    names = [p.name for p in multi.procs]
    assert names.count("nginx") == 1 and len(instances(multi)) == INSTANCES
    balancer = next(p for p in multi.procs if p.name == "nginx")
    assert balancer.port == multi.api_port
    assert all(p.port != multi.api_port for p in instances(multi))  # private ports
    store = CosmosStore.from_settings(multi.settings())
    artifacts = BlobArtifacts.connect(multi.blob_uri, local_emulators=True)
    with httpx.Client(base_url=multi.api_url, timeout=30) as api:
        assert api.get("/api/health").json()["status"] == "ok"
        body = {**run_body("default", runtime=2), "clients": 2}
        posted = api.post("/api/runs", json=body)
        assert posted.status_code == 202, posted.text
        run = wait_state(api, posted.json()["id"], ("completed", "failed"), timeout=120)
        assert run["state"] == "completed", run["error"]
        # The core path's checks (tests/test_e2e.py), for each client.
        scratch = Path(multi.targets["scratch"])
        for item in run["items"]:
            check_stored_result(api, store, artifacts, run, item, scratch, runtime=2)
    assert len(store.results.of_run(run["id"])) == 2  # one per client
    assert len({i["agent_id"] for i in run["items"]}) == 2  # two distinct agents
    assert run["aggregate"]["clients"] == 2 and not run["aggregate"]["partial"]
    # The agents waited for the start in held barrier calls (their ready reports said so).
    step = store.items.get_step(run["id"], 0)
    ids = [shard_id(run["id"], 0, step.barrier_round, k) for k in range(shard_count(2))]
    shards = store.items.get_shards(run["id"], ids).values()
    assert sum(len(s.held) for s in shards) == 2, list(shards)


def test_held_barrier_calls_over_three_instances_hear_go_in_time(multi: Stack) -> None:
    settings = multi.settings()
    store = CosmosStore.from_settings(settings)
    artifacts = BlobArtifacts.connect(multi.blob_uri, local_emulators=True)
    service = RunService(store, WorkQueues.from_settings(settings), artifacts, pools=("held",))
    check_held_step(multi.api_url, service, "held", clients=4)


@pytest.mark.fio
def test_a_4_client_step_completes_when_an_instance_is_killed_in_its_middle(
    multi: Stack, fio_agents: list[Proc]
) -> None:
    with httpx.Client(base_url=multi.api_url, timeout=30) as api:
        body = {**run_body("default", runtime=2), "clients": AGENTS}
        posted = api.post("/api/runs", json=body)
        assert posted.status_code == 202, posted.text
        run_id = posted.json()["id"]
        wait_state(api, run_id, ("running",), timeout=60)
        # The agents' ready reports, barrier polls, heartbeats and results now land on the
        # other two.
        victim = instances(multi)[0]
        localstack.stop_proc(victim, signal.SIGKILL, timeout=5)
        killed_ms = int(time.time() * 1000)
        run = wait_state(api, run_id, ("completed", "failed"), timeout=120)
    assert run["state"] == "completed", run["error"]
    results = CosmosStore.from_settings(multi.settings()).results.of_run(run_id)
    assert len(results) == AGENTS and len({r.agent_id for r in results}) == AGENTS
    assert len({i["agent_id"] for i in run["items"]}) == AGENTS
    # In its middle: every client's fio ran after the kill.
    assert all(r.ended_at_ms > killed_ms for r in results), (killed_ms, results)


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


KEYS = 30
POSTS = 40


def post_all(url: str, bodies: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, int, str]]:
    """Every (key, body) POSTed at the same moment, one thread each, each retried with its
    key while the answer is 503 (the database did not confirm in time), as benchctl
    retries. (key, status, run id) per POST."""
    answers: list[tuple[str, int, str]] = []
    lock = threading.Lock()
    start = threading.Barrier(len(bodies))

    def post(key: str, body: dict[str, Any]) -> None:
        with httpx.Client(base_url=url, timeout=60) as c:
            start.wait()
            for _ in range(10):
                r = c.post("/api/runs", json=body, headers={"Idempotency-Key": key})
                if r.status_code != 503:
                    break
                time.sleep(0.5)
        with lock:
            answers.append((key, r.status_code, r.json().get("id", r.text)))

    threads = [threading.Thread(target=post, args=kb) for kb in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def ended(api: httpx.Client, runs: list[str], timeout: float) -> dict[str, str]:
    """Each run's final state; on a timeout, what each run that has not ended is doing."""
    states: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while len(states) < len(runs) and time.monotonic() < deadline:
        for run_id in runs:
            if run_id not in states:
                state = api.get(f"/api/runs/{run_id}").json()["state"]
                if state in ("completed", "failed", "cancelled"):
                    states[run_id] = state
        time.sleep(0.5)
    stuck = [api.get(f"/api/runs/{r}").json() for r in runs if r not in states]
    assert not stuck, [(r["id"], r["state"], r.get("queue_position")) for r in stuck]
    return states


def one_run_per_key(answers: list[tuple[str, int, str]], keys: list[str]) -> list[str]:
    """Every POST answered 202 or 200; one run per key, the one its key names, created
    once (202) and replayed otherwise. The runs, sorted."""
    refused = [a for a in answers if a[1] not in (200, 202)]
    assert len(answers) == POSTS and not refused, refused
    runs = sorted({run for _, _, run in answers})
    assert runs == sorted(run_id_for_key(k) for k in keys)
    created = sorted(k for k, status, _ in answers if status == 202)
    assert created == sorted(keys), answers
    return runs


def held(store: CosmosStore, run_ids: list[str]) -> list[tuple[str, str, str]]:
    """(claimed, ended, run id) of each run's items: when a client held them (ISO
    instants of one clock, the API's, so they sort as time does)."""
    out = []
    for run_id in run_ids:
        _, items = store.items.of_run(run_id)
        for i in items:
            assert i.claimed_at and i.ended_at, i
            out.append((i.claimed_at, i.ended_at, run_id))
    return out


def test_40_posts_on_30_keys_give_30_runs_admitted_one_at_a_time(multi: Stack) -> None:
    prefix = f"multi-{time.time_ns()}"
    keys = [f"{prefix}-{k}" for k in range(KEYS)]
    body = {**run_body(SIM_POOL, runtime=1), "clients": 1}
    # Every key once, and 10 of them a second time, side by side.
    bodies = [(key, body) for key in keys] + [(key, body) for key in keys[: POSTS - KEYS]]
    store = CosmosStore.from_settings(multi.settings())
    sims = start_sim_agents(multi, SIMS, targets=["scratch"])
    try:
        runs = one_run_per_key(post_all(multi.api_url, bodies), keys)
        with httpx.Client(base_url=multi.api_url, timeout=30) as api:
            states = ended(api, runs, timeout=240)
    finally:
        localstack.stop_proc(sims, signal.SIGKILL, timeout=5)
    assert set(states.values()) == {"completed"}, states
    for run_id in runs:
        assert len(store.results.of_run(run_id)) == 1
    # One at a time: each run's item was claimed after the previous one's ended (a run's
    # targets are freed only when its last item has ended).
    spans = sorted(held(store, runs))
    overlaps = [(a, b) for a, b in itertools.pairwise(spans) if b[0] < a[1]]
    assert not overlaps, overlaps
