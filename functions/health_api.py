"""``GET /api/health``: the database answers, and each timer completed a tick recently."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from core.errors import BenchError
from core.runs.timer import TIMERS, tick_check
from functions import apidocs as d
from functions.context import Services
from functions.openapi import doc
from functions.params import JsonRoute, Parts

router = APIRouter(route_class=JsonRoute)
HEALTH_WAIT_S = 4.0  # the database's share of /api/health's 5 s
STARTED_MS = int(time.time() * 1000)  # a timer not recorded yet is stale only after a while


def _read_ticks(parts: Services) -> dict[str, int | None]:
    store = parts.store
    store.ping()
    return {name: store.ticks.get(name) for name in TIMERS}


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


@router.get("/api/health", **doc(d.Health, also={503: d.Health}))
async def health(parts: Parts) -> JSONResponse:
    """The database answers, and each timer completed a tick recently (the last one is
    recorded in the database, so every API instance judges the same timers)."""
    checks: dict[str, str] = {}
    timers: dict[str, dict[str, Any]] = {}
    try:
        # Whatever the database does, health answers within 5 s (issue 12.2).
        ticks = await asyncio.wait_for(asyncio.to_thread(_read_ticks, parts), HEALTH_WAIT_S)
        checks["cosmos"] = "ok"
    except BenchError as e:
        checks["cosmos"] = f"error: {e}"
    except TimeoutError:
        checks["cosmos"] = f"error: no answer within {HEALTH_WAIT_S:g} s"
    else:
        now = int(time.time() * 1000)
        stale_s = parts.settings.timer_stale_s
        for name, last in ticks.items():
            checks[f"timer.{name}"] = tick_check(last, now, stale_s, STARTED_MS)
            timers[name] = {
                "last_tick_at": _iso(last),
                "age_s": None if last is None else round(max(0, now - last) / 1000, 1),
            }
    ok = all(v == "ok" for v in checks.values())
    return JSONResponse(
        {"status": "ok" if ok else "degraded", "checks": checks, "timers": timers},
        status_code=200 if ok else 503,
    )
