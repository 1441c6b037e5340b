"""Timer work, shared by the Functions timer trigger and the local stack's timer loop."""

from __future__ import annotations

import asyncio
import logging
import time

from adapters import retention
from core.errors import BenchError, StoreUnavailable
from functions import context

log = logging.getLogger(__name__)

FINALIZE_SCHEDULE = "0 */1 * * * *"  # NCRONTAB, every minute in Azure
SCHEDULES_SCHEDULE = "5 */1 * * * *"  # every minute, a few seconds after the minute


# A timer records its complete ticks at most this often (locally it ticks twice a second;
# in Azure once a minute). Issue 24 records the same documents from its crash-only tick.
TICK_RECORD_MS = 5_000
_recorded: dict[str, int] = {}


def _tick_done(name: str) -> None:
    """Record that timer ``name`` completed a tick (the ``ticks`` container): what
    ``/api/health`` and the ``bench.timer.last_tick_age`` metric read."""
    now = int(time.time() * 1000)
    if now - _recorded.get(name, 0) < TICK_RECORD_MS:
        return
    try:
        context.store().ticks.put(name, now)
        _recorded[name] = now
    except StoreUnavailable as e:  # the tick itself went through
        log.warning("timer %s: its tick could not be recorded: %s", name, e)


def finalize_tick() -> list[str]:
    scaling = context.autoscaler()
    if scaling is not None:
        try:
            changed = scaling.tick()
            if changed:
                log.info("pool capacities set: %s", changed)
        except (BenchError, ValueError, RuntimeError) as e:  # runs still advance
            log.warning("scaling pools failed: %s", e)
    done = context.service().tick()
    if done:
        log.info("finalized runs: %s", ", ".join(done))
    _tick_done("runs")
    return done


def schedules_tick() -> list[str]:
    started = context.scheduler().tick()
    if started:
        log.info("scheduled runs started: %s", ", ".join(started))
    _tick_done("schedules")
    return started


RETENTION_EVERY_S = 5.0  # the local sweep's period (it lists every raw artifact)
_swept: list[float] = [0.0]


def retention_tick() -> None:
    """The local stack only: what Cosmos DB's TTL and Blob lifecycle management do in Azure
    (the local servers have neither; adapters/retention.py)."""
    now = time.time()
    if now - _swept[0] < RETENTION_EVERY_S:
        return
    _swept[0] = now
    retention.sweep(context.store(), context.artifacts(), context.settings().retention, now)


async def local_timer_loop(interval_s: float) -> None:
    """The local stack has no Functions host: run the same timer work on a short period."""
    while True:
        for tick in (schedules_tick, finalize_tick, retention_tick):  # each goes on alone
            try:
                await asyncio.to_thread(tick)
            except BenchError as e:
                log.warning("timer tick %s failed: %s", tick.__name__, e)
            except Exception:
                log.exception("timer tick %s crashed", tick.__name__)
        await asyncio.sleep(interval_s)
