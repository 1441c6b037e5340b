"""A run's live figures while it measures: the API's JSON and the web UI's live page.

Both read what the agents relayed with their heartbeats (core.runs.live); neither is ever
a run's result, and both say so: the fields are named live_*, the page is titled live.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse

from core.models.live import LIVE_RING
from core.runs.live_view import LiveView, read_view
from functions.openapi import doc
from functions.params import STORE, JsonRoute, RunId, Svc
from reports.live_page import live_page

router = APIRouter(route_class=JsonRoute)


@router.get("/api/runs/{run_id}/live", **doc(LiveView, errors=(400, 404, *STORE)))
async def run_live(
    run_id: RunId,
    svc: Svc,
    step: Annotated[
        int | None,
        Query(ge=0, le=10_000, description="the step to show (default: the latest with samples)"),
    ] = None,
    seconds: Annotated[
        int, Query(ge=1, le=LIVE_RING, description="how many of the last seconds to return")
    ] = LIVE_RING,
) -> dict[str, Any]:
    """Live: each client's and the total's IOPS, MiB/s and mean total latency per second
    while a step measures, relayed from fio's status output by the agents' heartbeats (the
    last minute per client). Not the run's figures: those come from fio's final output and
    logs, in GET /api/runs/{run_id} once the step ends."""
    view = await asyncio.to_thread(read_view, svc.store, run_id, step=step, seconds=seconds)
    return view.model_dump(mode="json")


@router.get("/ui/runs/{run_id}/live", include_in_schema=False)
async def ui_run_live(run_id: RunId, svc: Svc) -> HTMLResponse:
    run = await asyncio.to_thread(svc.store.runs.get, run_id)  # 404 for an unknown run
    return HTMLResponse(await asyncio.to_thread(live_page, run.id))
