"""One simulated client: agent/worker.py's protocol with a declared rate instead of fio.

It takes its own messages from the pool's queue, and speaks to the API with the agent's own
client (agent.api_client): claim, ready, the barrier's polls, heartbeats every second while
it holds a started item (with live samples, as agent.live relays fio's), the artifacts and
the result, then deletes the message, as the worker does. Where the worker starts fio at the
step's instant and waits for it, a simulated client waits for the measured period to pass
and writes what fio would have (simagent.measured). Its calls are blocking, so they run on
the fleet's threads (``Fleet.call``) while the clients themselves are coroutines: a
thousand fit in one process.

Its start instant is the step's instant when it heard "go" in time, else the instant it
heard it: the control plane's skew, without the simulator's own wake-up delay (recorded
apart, ``woke_ms``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import ValidationError

from adapters.queue import LeaseLost, Message, WorkQueues
from agent import handover
from agent.api_client import ApiClient, ApiError
from agent.cleanup import parse_order
from core.errors import BenchError, StoreUnavailable
from core.models import HostFacts, WorkItem
from core.models.live import LIVE_RING, LiveDirection, LiveSample
from core.runs.barrier_timing import barrier_poll_ms
from simagent.figures import DeclaredRate, split
from simagent.measured import Measurements

log = logging.getLogger(__name__)
T = TypeVar("T")
HEARTBEAT_S = 1.0  # agent.lease's


def now_ms() -> int:
    return int(time.time() * 1000)


class Fleet(Protocol):
    """What a client takes from its fleet (simagent.fleet.Fleet)."""

    pool: str
    visibility_timeout: int
    retry_delay_s: int
    idle_min_s: float
    idle_max_s: float
    item_beat_s: float
    rate: DeclaredRate
    host: HostFacts
    measurements: Measurements

    def api_client(self) -> ApiClient: ...
    def work_queues(self) -> WorkQueues: ...
    async def call(self, fn: Callable[..., T], *args: Any) -> T: ...
    async def call_lease(self, fn: Callable[..., T], *args: Any) -> T: ...
    async def call_poll(self, fn: Callable[..., T], *args: Any) -> T: ...
    def jitter(self) -> float: ...
    def idle_wait(self, wait_s: float) -> float: ...
    def first_beat_phase(self) -> float: ...
    def block_bytes(self, bs: str) -> int: ...
    def write(self, rec: Record) -> None: ...


@dataclass
class Record:
    """What one client did with one item (the fleet writes one JSON line per item)."""

    agent_id: str
    item_id: str
    run_id: str
    step: int
    client: int
    outcome: str
    received_ms: int
    start_at_ms: int | None = None  # the step's instant ("go")
    heard_ms: int | None = None  # when this client heard "go"
    start_ms: int | None = None  # its start instant: max(start_at, heard)
    woke_ms: int | None = None  # when its coroutine woke at the instant
    result_sent_ms: int | None = None  # when it sent its result
    stored_ms: int | None = None  # when the API answered it
    reason: str = ""


class _Lease:
    """agent.lease for a coroutine: renew the message at half its visibility timeout,
    heartbeat once started (with the live ring) every second as the agent does, or every
    ``item_beat_s`` in a large fleet (simagent.fleet), hear cancellation."""

    def __init__(self, client: SimClient, item: WorkItem, msg: Message) -> None:
        self.c, self.item, self.message = client, item, msg
        self.lost = threading.Event()
        self.cancelled = False
        self.heartbeats = False
        self.live: deque[LiveSample] = deque(maxlen=LIVE_RING)
        self._sent_to_ms = 0
        self._renewed = time.monotonic()
        # The first beat at the first tick once started, as the agent's; in a large fleet at
        # a random point of the first ``item_beat_s``, as every later beat is spread: a step's
        # clients claim within seconds of each other, and their first beats all at the first
        # tick came at twice the fleet's rate (issue 29: 1,199 heartbeats in a 28 s intake of
        # 1,000 clients at --item-beats-per-s 20; the claim records a sign of life already).
        self._beaten = time.monotonic() - client.fleet.first_beat_phase()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        timeout = self.c.fleet.visibility_timeout
        while not self.lost.is_set():
            await asyncio.sleep(min(HEARTBEAT_S, timeout / 2))
            if time.monotonic() - self._renewed >= timeout / 2:
                await self._renew()
            due = time.monotonic() - self._beaten >= self.c.fleet.item_beat_s
            if self.heartbeats and due and not self.lost.is_set():
                self._beaten = time.monotonic()
                await self._beat()

    async def _renew(self) -> None:
        c = self.c
        try:
            self.message = await c.fleet.call_lease(
                c.queues.renew, c.fleet.pool, self.message, c.fleet.visibility_timeout
            )
            self._renewed = time.monotonic()
        except LeaseLost:
            self.lost.set()
        except StoreUnavailable as e:
            log.warning("%s: renew failed: %s", c.agent_id, e)

    async def _beat(self) -> None:
        fresh = self.live and self.live[-1].end_ms > self._sent_to_ms
        samples = list(self.live) if fresh else []
        c = self.c
        try:
            if await c.fleet.call_lease(c.api.heartbeat, self.item, c.agent_id, samples):
                self.cancelled = True
            if samples:
                self._sent_to_ms = samples[-1].end_ms
        except ApiError as e:
            if e.status in (404, 409):
                self.lost.set()
        except BenchError as e:
            log.warning("%s: heartbeat failed: %s", c.agent_id, e)


class SimClient:
    def __init__(self, fleet: Fleet, agent_id: str) -> None:
        self.fleet = fleet
        self.agent_id = agent_id
        self.api: ApiClient = fleet.api_client()
        self.queues: WorkQueues = fleet.work_queues()
        self.item_id: str | None = None  # what the registry hears it holds

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.fleet.call(fn, *args)

    async def serve(self, stop: asyncio.Event) -> None:
        """Poll the pool's queue and serve items until ``stop`` is set."""
        f = self.fleet
        idle = f.idle_min_s
        while not stop.is_set():
            try:
                msg = await self.call(self.queues.receive, f.pool, f.visibility_timeout)
            except BenchError as e:
                log.warning("%s: polling the queue failed: %s", self.agent_id, e)
                msg = None
            if msg is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), f.idle_wait(idle * f.jitter()))
                idle = min(idle * 2, f.idle_max_s)
                continue
            idle = f.idle_min_s
            try:
                await self.process(msg)
            except Exception:  # crash-only, as the worker: no item ends the client
                log.exception("%s: message %s", self.agent_id, msg.id)

    async def process(self, msg: Message) -> None:
        received = now_ms()
        if parse_order(msg.content) is not None:
            await self._delete(msg)  # a clean order: a simulated client wrote no files
            return
        try:
            item = WorkItem.model_validate_json(msg.content)
        except ValidationError:
            await self._delete(msg)
            return
        rec = Record(self.agent_id, item.item_id, item.run_id, item.step, item.client, "", received)
        lease = _Lease(self, item, msg)
        lease.start()
        self.item_id = item.item_id
        try:
            with self.api.retry_until(lease.lost):
                rec.outcome = await self._run_item(item, lease, rec)
        except ApiError as e:
            rec.outcome, rec.reason = "failed", str(e)
            with contextlib.suppress(BenchError):
                await self._failed(item, lease, f"the API refused this agent's call: {e}")
        except StoreUnavailable as e:
            rec.outcome, rec.reason = "error", str(e)  # redelivered after its timeout
        finally:
            await lease.stop()
            self.item_id = None
        if rec.outcome != "completed":  # a completed item's record is written at its result
            self.fleet.write(rec)

    async def _run_item(self, item: WorkItem, lease: _Lease, rec: Record) -> str:
        decision = await self.call(
            self.api.claim, item, self.agent_id, lease.message.dequeue_count, lease.message.id
        )
        rec.reason = decision.reason
        if decision.action == "drop":
            await self._delete(lease.message)
            return "dropped"
        if decision.action != "run":
            await self._release(lease, self.fleet.retry_delay_s)
            return "released"
        if item.engine != "fio" or item.workload.metadata is not None:
            reason = "a simulated client runs only fio data workloads"
            await self._failed(item, lease, reason, permanent=True)
            return "failed"
        lease.heartbeats = True
        start = await self._await_start(item, lease, rec)
        if start is None:
            return "aborted" if not lease.lost.is_set() else "lease lost"
        stopped = await self._run(item, lease, start)
        if stopped:
            return stopped
        assert rec.start_at_ms is not None
        measured = self.fleet.measurements.of(
            item,
            self.fleet.rate,
            agent_id=self.agent_id,
            host=self.fleet.host,
            scheduled_ms=rec.start_at_ms,
            started_ms=start,
        )
        # The agent's own hand-over (agent.handover): uploads, then the result.
        agent_id, artifacts = self.agent_id, measured.artifacts
        result, receipts = await self.call(
            handover.prepared, self.api, item, agent_id, measured.result, artifacts
        )
        rec.result_sent_ms = now_ms()
        await self.call(handover.put, self.api, item, agent_id, result, receipts)
        rec.stored_ms = now_ms()
        rec.outcome = "completed"
        self.fleet.write(rec)  # now: its message's delete may wait on a busy queue
        await lease.stop()
        await self._delete(lease.message)
        return "completed"

    async def _await_start(self, item: WorkItem, lease: _Lease, rec: Record) -> int | None:
        """Ready, the barrier's polls until "go": the start instant, or None."""
        # On the barrier's own threads (simagent.fleet.POLL_THREADS), as an agent's own.
        barrier = await self.fleet.call_poll(self.api.ready, item, self.agent_id)
        while barrier.status == "wait":
            if lease.lost.is_set() or lease.cancelled:
                await self._stopped(item, lease)
                return None
            await asyncio.sleep(barrier_poll_ms(item.clients) / 1000)
            barrier = await self.fleet.call_poll(self.api.barrier, item, self.agent_id)
        if barrier.status != "go" or barrier.start_at_ms is None:
            rec.reason = barrier.reason
            await self._delete(lease.message)
            return None
        rec.heard_ms = now_ms()
        rec.start_at_ms = barrier.start_at_ms
        rec.start_ms = max(barrier.start_at_ms, rec.heard_ms)
        await asyncio.sleep(max(0.0, barrier.start_at_ms / 1000 - time.time()))
        rec.woke_ms = now_ms()
        return rec.start_ms

    async def _run(self, item: WorkItem, lease: _Lease, start_ms: int) -> str | None:
        """The measured period passes (ramp and runtime), a live sample each second."""
        w = item.workload
        measured_from = start_ms + w.ramp_time * 1000
        end = measured_from + w.runtime * 1000
        rates = split(self.fleet.rate, w)
        bs_bytes = self.fleet.block_bytes(w.bs)
        second = measured_from + 1000
        while (now := now_ms()) < end:
            if lease.lost.is_set():
                return "lease lost"
            if lease.cancelled:
                await self._stopped(item, lease)
                return "cancelled"
            while second <= min(now, end):
                dirs = {
                    d: LiveDirection(
                        ios=n, bytes=n * bs_bytes, lat_mean_ns=self.fleet.rate.latency_ns
                    )
                    for d, n in rates.items()
                }
                lease.live.append(LiveSample(end_ms=second, dur_ms=1000, **dirs))
                second += 1000
            await asyncio.sleep(min(0.2, max(0.0, (end - now) / 1000)))
        return None

    async def _stopped(self, item: WorkItem, lease: _Lease) -> None:
        if lease.cancelled and not lease.lost.is_set():
            await self.call(self.api.cancelled, item, self.agent_id)
            await self._delete(lease.message)

    async def _failed(
        self, item: WorkItem, lease: _Lease, message: str, *, permanent: bool = False
    ) -> None:
        final = await self.call(
            lambda: self.api.failure(item, self.agent_id, message, permanent=permanent)
        )
        if final:
            await self._delete(lease.message)
        else:
            await self._release(lease, self.fleet.retry_delay_s)

    async def _delete(self, msg: Message) -> None:
        try:
            await self.call(self.queues.delete, self.fleet.pool, msg)
        except LeaseLost as e:
            log.warning("%s: %s", self.agent_id, e)

    async def _release(self, lease: _Lease, delay_s: int) -> None:
        await lease.stop()
        try:
            await self.call(self.queues.renew, self.fleet.pool, lease.message, delay_s)
        except (LeaseLost, StoreUnavailable) as e:
            log.warning("%s: could not release message: %s", self.agent_id, e)
