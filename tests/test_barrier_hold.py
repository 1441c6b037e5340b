"""Held barrier calls (issue 29.3): an agent waiting at its step's start barrier asks the API
to hold its call (``wait_ms``) instead of polling, each API process reads the step once per
WATCH_MS for all the calls it holds (core.runs.barrier_watch) and answers them all when the
start instant is set; the lead then covers that watch and one answer, not a poll interval
and two round trips (core.runs.barrier_timing).

- pure: the watch reads a step once per interval whatever the number of held calls, wakes
  them all at once, lets a call's bound pass with "wait", and stops reading when nobody
  waits;
- on the stack (one API here, three behind nginx in tests/test_local_multi.py): held calls
  (one sent before its client's ready report) answered "go" with the common instant,
  after the ready report that completed the set (made outside every API process, so only
  the watch's reads can have woken them) and before the instant; a call without
  ``wait_ms`` (an older agent) answered at once; a bound passing answers "wait";
- the agent's side: tests/test_barrier_wait.py."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues
from benchctl.localstack import Stack
from core.errors import NotFound
from core.models.barrier_shard import shard_count, shard_id
from core.models.holder import AgentRef
from core.models.ids import item_id
from core.models.state import ItemState
from core.models.stored import Step
from core.runs.barrier_timing import WAKE_MS, barrier_lead_ms
from core.runs.barrier_watch import StepWatch, moved
from core.runs.service import RunService
from tests.conftest import run_body

RTT_MS = 500  # the round trip the test's clients report: the lead is sized on it


def _step(**kw: object) -> Step:
    return Step.model_validate({"id": "r-1.s0", "run_id": "r-1", "step": 0, "clients": 4, **kw})


def test_a_held_call_is_answered_when_the_step_starts_fails_or_passes_its_deadline() -> None:
    assert not moved(_step(), 1_000)
    assert moved(_step(start_at_ms=2_000), 1_000)
    assert moved(_step(failed_reason="3 of 4 clients claimed within 120 s"), 1_000)
    assert not moved(_step(deadline_ms=1_000), 1_000)
    assert moved(_step(deadline_ms=1_000), 1_001)
    assert moved(None, 1_000)  # gone: the call answers as a poll (404)


class FakeSteps:
    """A step read by the watch; counts the reads."""

    def __init__(self) -> None:
        self.step = _step()
        self.reads = 0
        self.lock = threading.Lock()

    def read(self, run_id: str, step: int) -> Step:
        with self.lock:
            self.reads += 1
            if self.step is None:
                raise NotFound(f"{run_id}.s{step}")
            return self.step


def test_one_read_per_interval_wakes_every_held_call_at_once() -> None:
    steps = FakeSteps()

    async def scenario() -> tuple[list[tuple[bool, int]], int]:
        watch = StepWatch(steps.read, 0.05, lambda: 0)

        async def held() -> tuple[bool, int]:
            woke, seen = await watch.wait("r-1", 0, 30.0)
            assert seen is not None and seen.start_at_ms == 9_999
            return woke, steps.reads  # the reads made when this call woke

        calls = [asyncio.create_task(held()) for _ in range(50)]
        await asyncio.sleep(0.5)
        with steps.lock:
            before = steps.reads
            steps.step = _step(start_at_ms=9_999)
        return await asyncio.gather(*calls), before

    answers, before = asyncio.run(scenario())
    assert all(woke for woke, _ in answers)
    # 0.5 s at one read per 50 ms at most, for 50 calls (not 50 reads per interval)...
    assert 1 <= before <= 11, before
    # ...and every call woken by the first read after the instant was set, together.
    assert {reads for _, reads in answers} == {before + 1}


def test_a_bound_passing_answers_wait_and_the_watch_stops_reading() -> None:
    steps = FakeSteps()

    async def scenario() -> tuple[bool, int, int]:
        watch = StepWatch(steps.read, 0.05, lambda: 0)
        woke, _ = await watch.wait("r-1", 0, 0.2)
        after = steps.reads
        await asyncio.sleep(0.3)
        return woke, after, steps.reads

    woke, after, later = asyncio.run(scenario())
    assert not woke
    assert 1 <= after <= 5 and later == after  # nobody holds a call: no more reads


def test_a_step_gone_wakes_its_calls() -> None:
    steps = FakeSteps()

    async def scenario() -> tuple[bool, Step | None]:
        watch = StepWatch(steps.read, 0.05, lambda: 0)
        task = asyncio.create_task(watch.wait("r-1", 0, 5.0))
        await asyncio.sleep(0.1)
        steps.step = None  # type: ignore[assignment]
        return await task

    assert asyncio.run(scenario()) == (True, None)


def test_a_poke_wakes_the_held_calls_at_once_with_one_read() -> None:
    """The process whose ready report set the instant pokes its watch: its held calls hear
    "go" then, not at the watch's next read (here 2 s away), with one read for them all."""
    steps = FakeSteps()

    async def scenario() -> tuple[list[tuple[bool, Step | None]], float, int, int]:
        watch = StepWatch(steps.read, 2.0, lambda: 0)
        calls = [asyncio.create_task(watch.wait("r-1", 0, 30.0)) for _ in range(32)]
        await asyncio.sleep(0.1)  # the first read: still waiting
        before = steps.reads
        steps.step = _step(start_at_ms=9_999)
        set_at = time.monotonic()
        watch.poke("r-1", 0)
        watch.poke("r-1", 1)  # no call waits for that step here: nothing to read
        answers = await asyncio.gather(*calls)
        return answers, time.monotonic() - set_at, before, steps.reads

    answers, took_s, before, after = asyncio.run(scenario())
    assert all(woke and seen is not None and seen.start_at_ms == 9_999 for woke, seen in answers)
    assert took_s < 1.0, took_s  # not the watch's 2 s tick
    assert (before, after) == (1, 2)


def post_barrier(
    api_url: str, run_id: str, item: str, agent: str, path: str = "barrier", **extra: object
) -> tuple[dict[str, Any], float]:
    """One barrier call (or ``path`` "ready": a ready report) through the API: its answer
    and when it came (Unix ms)."""
    body = {"run_id": run_id, "item_id": item, "agent_id": agent, **extra}
    with httpx.Client(base_url=api_url, timeout=60) as c:
        r = c.post(f"/api/agent/{path}", json=body)
    assert r.status_code == 200, r.text
    return r.json(), time.time() * 1000


def check_held_step(api_url: str, service: RunService, pool: str, clients: int = 4) -> None:
    """A step of ``clients``: the first ready and waiting in held barrier calls through the
    API at ``api_url``, the last but one's call held from before its ready report; the last
    one's ready report, made here (in no API process), sets the instant; every held call
    hears it before the instant."""
    store = service.store
    run, _ = service.submit({**run_body(pool), "clients": clients})
    ids = [item_id(run.id, 0, c) for c in range(clients)]
    agents = [AgentRef(f"hold-{pool}-{c}") for c in range(clients)]
    first, last = list(zip(ids[:-2], agents[:-2], strict=True)), (ids[-1], agents[-1])
    try:
        for i, agent in zip(ids, agents, strict=True):
            work = store.items.get_item(run.id, i).work_item
            assert service.claim(work, agent=agent, dequeue_count=1, message_id=i).action == "run"
        for i, agent in first:
            assert service.ready(run.id, i, agent, RTT_MS, held=True).status == "wait"
        # An older agent's poll: answered at once. A bound passing: "wait" after it.
        i, agent = first[0]
        sent = time.time() * 1000
        answer, at = post_barrier(api_url, run.id, i, agent.id)
        assert answer["status"] == "wait" and at - sent < 2_000
        sent = time.time() * 1000
        answer, at = post_barrier(api_url, run.id, i, agent.id, wait_ms=400)
        assert answer["status"] == "wait" and at - sent >= 400
        with ThreadPoolExecutor(clients - 1) as threads:
            calls = [
                threads.submit(post_barrier, api_url, run.id, i, a.id, wait_ms=5_000)
                for i, a in first
            ]
            # The agent's first held call goes with its ready report (agent.barrier_wait):
            # held while its item is only claimed, it hears "go" as the others do.
            i, agent = ids[-2], agents[-2]
            calls.append(threads.submit(post_barrier, api_url, run.id, i, agent.id, wait_ms=5_000))
            time.sleep(0.5)
            assert service.ready(run.id, i, agent, RTT_MS, held=True).status == "wait"
            time.sleep(1.0)  # every call held by now
            set_at = time.time() * 1000
            go = service.ready(run.id, last[0], last[1], RTT_MS, held=True)
            ready_at = time.time() * 1000
            answers = [c.result() for c in calls]
        assert go.status == "go" and go.start_at_ms is not None
        # The lead of held calls (no poll interval, not twice the round trip), from the
        # moment the report completed the set.
        lead = barrier_lead_ms(clients, [RTT_MS] * clients, 0, held=True)
        assert lead < barrier_lead_ms(clients, [RTT_MS] * clients, 0)
        assert set_at + lead <= go.start_at_ms <= ready_at + lead + 1
        shards = store.items.get_shards(
            run.id, [shard_id(run.id, 0, 0, k) for k in range(shard_count(clients))]
        )
        assert sum(len(s.held) for s in shards.values()) == clients
        for answer, heard in answers:
            assert answer["status"] == "go" and answer["start_at_ms"] == go.start_at_ms
            assert set_at <= heard <= go.start_at_ms - WAKE_MS, (set_at, heard, go.start_at_ms)
    finally:
        service.cancel(run.id)


@pytest.mark.stack
def test_held_calls_hear_go_before_the_instant(
    stack: Stack, store: CosmosStore, queues: WorkQueues, artifacts: BlobArtifacts, pool: str
) -> None:
    service = RunService(store, queues, artifacts, pools=tuple(stack.pool_names))
    check_held_step(stack.api_url, service, pool)


@pytest.mark.stack
def test_a_ready_report_with_wait_ms_is_held_as_the_first_barrier_call(
    stack: Stack, store: CosmosStore, queues: WorkQueues, artifacts: BlobArtifacts, pool: str
) -> None:
    """Issue 29.3: the agent sends no barrier call beside its ready report; the API holds
    the report itself while the step waits and answers it "go" with the common instant."""
    service = RunService(store, queues, artifacts, pools=tuple(stack.pool_names))
    run, _ = service.submit({**run_body(pool), "clients": 2})
    ids = [item_id(run.id, 0, c) for c in range(2)]
    agents = [AgentRef(f"hold-ready-{pool}-{c}") for c in range(2)]
    try:
        for i, agent in zip(ids, agents, strict=True):
            work = store.items.get_item(run.id, i).work_item
            assert service.claim(work, agent=agent, dequeue_count=1, message_id=i).action == "run"
        held = {"rtt_ms": RTT_MS, "barrier_wait": True, "wait_ms": 5_000}
        with ThreadPoolExecutor(1) as threads:
            call = threads.submit(
                post_barrier, stack.api_url, run.id, ids[0], agents[0].id, "ready", **held
            )
            time.sleep(1.0)
            assert not call.done(), "held while the step waits"
            assert store.items.get_item(run.id, ids[0]).state == ItemState.READY
            go = service.ready(run.id, ids[1], agents[1], RTT_MS, held=True)
            answer, heard = call.result()
        assert go.status == "go" and go.start_at_ms is not None
        assert answer["status"] == "go" and answer["start_at_ms"] == go.start_at_ms
        assert heard <= go.start_at_ms - WAKE_MS
    finally:
        service.cancel(run.id)
