"""Timer work, shared by the Functions timer trigger and the local stack's timer loop; each
tick works on the parts it is given (functions/context.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from adapters import retention
from adapters.timer_lease import TimerLease
from core.errors import BenchError
from functions.context import Services

log = logging.getLogger(__name__)

RUNS_SCHEDULE = "0 */1 * * * *"  # NCRONTAB, every minute in Azure
SCHEDULES_SCHEDULE = "5 */1 * * * *"  # every minute, a few seconds after the minute


def runs_tick(parts: Services) -> list[str]:
    """The runs timer (``runs`` in /api/health): set elastic pools' capacity, then advance
    every run that is due (core.runs.timer: admission, deliveries and their retries, start
    barriers that expired, aggregation and completion), then update the Teams run cards.
    Returns the runs it finalized."""
    scaling = parts.autoscaler
    if scaling is not None:
        try:
            changed = scaling.tick()
            if changed:
                log.info("pool capacities set: %s", changed)
        except (BenchError, ValueError, RuntimeError) as e:  # runs still advance
            log.warning("scaling pools failed: %s", e)
    done = parts.service.tick()
    if done:
        log.info("finalized runs: %s", ", ".join(done))
    kept = parts.threads
    if kept is not None:  # the Teams bot's run cards, updated in place as their runs move
        try:
            moved = kept.refresh_open()
            if moved:
                log.info("run cards updated: %s", ", ".join(moved))
        except BenchError as e:  # the database; the cards catch up next tick
            log.warning("updating run cards failed: %s", e)
    return done


def schedules_tick(parts: Services) -> list[str]:
    started = parts.scheduler.tick()
    if started:
        log.info("scheduled runs started: %s", ", ".join(started))
    return started


_swept: list[float] = [0.0]


def retention_tick(parts: Services) -> None:
    """The local stack only: what Cosmos DB's TTL and Blob lifecycle management do in Azure
    (the local servers have neither; adapters/retention.py)."""
    now = time.time()
    rules = parts.settings.retention
    if now - _swept[0] < rules.sweep_every_s():  # it lists every raw artifact
        return
    _swept[0] = now
    retention.sweep(parts.store, parts.artifacts, rules, now)


def _timer_lease(parts: Services) -> TimerLease | None:
    """The lease that elects the one instance that ticks, when the stack runs several."""
    settings = parts.settings
    if settings.local_timer_lease_s <= 0:
        return None
    return TimerLease.connect(
        settings.blob_uri,
        local_emulators=settings.local_emulators,
        duration_s=settings.local_timer_lease_s,
    )


class LocalPace:
    """How often the local timer ticks: its period while the API is in use, and up to
    IDLE_FACTOR times that once no request came for IDLE_AFTER_S; a request wakes it.

    On this 2-core VM a tick after a sleep costs about 35 ms of CPU where the same tick
    warm costs 5 ms (the first work after any sleep runs slow here, tests/test_counters.py),
    so an idle stack ticking twice a second took 12 % of a CPU in its API and 7 % in the
    Cosmos DB server (2026-11-28 00:11 UTC). Agents and callers of a run in progress call
    the API; what falls due with nobody calling (a barrier's deadline, a schedule) waits at
    most IDLE_FACTOR periods."""

    IDLE_AFTER_S = 20.0
    IDLE_FACTOR = 8

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._last_request = clock()
        self._woken = asyncio.Event()

    def used(self) -> None:
        """A request came in (the API's middleware calls this)."""
        self._last_request = self._clock()
        self._woken.set()

    def next_sleep_s(self) -> float:
        idle_s = self._clock() - self._last_request
        if idle_s < self.IDLE_AFTER_S:
            return self.interval_s
        return self.interval_s * self.IDLE_FACTOR

    async def sleep(self, steady: bool) -> None:
        """Until the next tick: the period when ``steady`` (a lease to renew on time) or
        in use, else the idle period or the next request, whichever comes first."""
        self._woken.clear()
        if steady or (pause := self.next_sleep_s()) <= self.interval_s:
            await asyncio.sleep(self.interval_s)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._woken.wait(), pause)


async def local_timer_loop(parts: Services, pace: LocalPace) -> None:
    """The local stack has no Functions host: run the same timer work on a short period
    (``pace``: slower while nobody calls the API). With several API instances, only the
    holder of the timers' blob lease ticks, as the Functions host runs a timer trigger on
    one instance; the lease is renewed each tick, so a holder that dies is replaced within
    the lease's duration and one tick."""
    lease = await asyncio.to_thread(_timer_lease, parts)
    try:
        while True:
            if lease is None or await asyncio.to_thread(lease.hold):
                if lease is not None:
                    log.info("timer tick")  # the tests count each instance's ticks
                await _tick_once(parts)
            await pace.sleep(steady=lease is not None)
    finally:
        if lease is not None:
            await asyncio.to_thread(lease.release)  # the next holder need not wait


async def _tick_once(parts: Services) -> None:
    # each goes on whatever the others do
    for tick in (schedules_tick, runs_tick, retention_tick):
        try:
            await asyncio.to_thread(tick, parts)
        except BenchError as e:
            log.warning("timer tick %s failed: %s", tick.__name__, e)
        except Exception:
            log.exception("timer tick %s crashed", tick.__name__)
