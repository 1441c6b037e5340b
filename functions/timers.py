"""Timer work, shared by the Functions timer trigger and the local stack's timer loop."""

from __future__ import annotations

import asyncio
import logging

from core.errors import BenchError
from functions import context

log = logging.getLogger(__name__)

FINALIZE_SCHEDULE = "0 */1 * * * *"  # NCRONTAB, every minute in Azure


def finalize_tick() -> list[str]:
    done = context.service().finalize_runs()
    if done:
        log.info("finalized runs: %s", ", ".join(done))
    return done


async def local_timer_loop(interval_s: float) -> None:
    """The local stack has no Functions host: run the same timer work on a short period."""
    while True:
        try:
            await asyncio.to_thread(finalize_tick)
        except BenchError as e:
            log.warning("timer tick failed: %s", e)
        except Exception:
            log.exception("timer tick crashed")
        await asyncio.sleep(interval_s)
