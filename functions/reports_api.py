"""Reports as HTML (one self-contained file each) and the read-only web UI's pages.

The UI is served by this app under /ui with the API's sign-in: in Azure, App Service
Authentication's browser session; locally, ``X-Api-Key`` as a header or as the cookie the
sign-in form at /ui/signin sets (functions/auth.py reads both).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated
from urllib.parse import parse_qs

import fastapi_offline
from fastapi import APIRouter, Query, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import StringConstraints

from core.errors import NotFound
from core.models import RUN_ID_PATTERN, TAG_KEY_PATTERN, Alias
from core.models.regression import TriageState
from core.models.state import RunState
from core.monitoring.monitor import Monitor
from core.runs.service import RunService
from functions.auth import API_KEY_COOKIE
from functions.openapi import doc
from functions.params import STORE, JsonRoute, Monitoring, RunId, SeriesKey, Svc
from reports import ui
from reports.compare import MAX_COMPARED, compare_page, gather_compare
from reports.data import gather_run, series_report
from reports.page import run_page, series_page

router = APIRouter(route_class=JsonRoute)

DOCS_ASSETS = "/api/docs/assets"
TagFilter = Annotated[
    str | None, Query(description="key=value", pattern=rf"{TAG_KEY_PATTERN[:-1]}=.{{0,256}}$")
]


def mount_docs(app: object) -> None:
    """Swagger UI from the files fastapi-offline packages (Swagger UI 5, which reads
    OpenAPI 3.1), never from a CDN."""
    from fastapi import FastAPI

    assert isinstance(app, FastAPI)
    assets = Path(fastapi_offline.__file__).parent / "static"
    app.mount(DOCS_ASSETS, StaticFiles(directory=assets), name="docs-assets")

    @app.get("/api/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/api/openapi.json",
            title="Storage benchmark service: API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
        )


async def _series(monitor: Monitor, key: str) -> dict[str, object]:
    found = await asyncio.to_thread(monitor.history, key)
    if not found.history:
        raise NotFound(f"series {key}")
    return found.model_dump(mode="json")


CompareRuns = Annotated[
    list[Annotated[str, StringConstraints(pattern=RUN_ID_PATTERN)]],
    Query(
        min_length=2,
        max_length=MAX_COMPARED,
        description="2 to 6 run ids; every run is compared with the first",
    ),
]
RUN_REPORT = "The run's report: one self-contained HTML file (plotly.js inlined)"
COMPARE_REPORT = "The runs compared: one self-contained HTML file (plotly.js inlined)"
SERIES_REPORT = "The series' report: one self-contained HTML file (plotly.js inlined)"


@router.get("/api/runs/{run_id}/report", **doc(None, html=RUN_REPORT, errors=(400, 404, *STORE)))
async def run_report(run_id: RunId, svc: Svc) -> HTMLResponse:
    """Charts (per-second IOPS and bandwidth, curves, latency histogram, share and skew,
    limits, host counters), the CLI's tables, the resolved request, the infrastructure and
    every verdict."""
    report = await asyncio.to_thread(gather_run, svc, run_id)
    return HTMLResponse(await asyncio.to_thread(run_page, report))


@router.get("/api/series/{key}/report", **doc(None, html=SERIES_REPORT, errors=(400, 404, *STORE)))
async def series_report_page(key: SeriesKey, monitor: Monitoring) -> HTMLResponse:
    """Each metric's history with infrastructure segments, change points and gate
    verdicts marked, and the regressions with their evidence."""
    history = await _series(monitor, key)
    return HTMLResponse(series_page(series_report(history)))


@router.get("/api/compare/report", **doc(None, html=COMPARE_REPORT, errors=(400, 404, *STORE)))
async def compare_report(run: CompareRuns, svc: Svc, monitor: Monitoring) -> HTMLResponse:
    """Each run's last step overlaid on the others (per-second IOPS of its window, latency
    curve, latency histogram) and a deltas table against the first run, judged against the
    noise of its series."""
    return HTMLResponse(await asyncio.to_thread(_compare_page, svc, monitor, run, False))


def _compare_page(svc: RunService, monitor: Monitor, run_ids: list[str], nav: bool) -> str:
    report = gather_compare(svc, monitor.compare, run_ids)
    return compare_page(report, nav=nav)


# ---- the read-only web UI (not part of the API document: pages for people) ----------


@router.get("/ui", include_in_schema=False)
async def ui_home() -> Response:
    return RedirectResponse("/ui/runs", status_code=303)


@router.get("/ui/signin", include_in_schema=False)
async def ui_signin_form(error: bool = False) -> HTMLResponse:
    return HTMLResponse(ui.signin_page(error))


@router.post("/ui/signin", include_in_schema=False)
async def ui_signin(request: Request) -> Response:
    """Keeps the key in an HttpOnly cookie, which GET requests may sign in with."""
    form = parse_qs((await request.body())[:4096].decode("utf-8", "replace"))
    key = (form.get("api_key") or [""])[0]
    out = RedirectResponse("/ui/runs", status_code=303)
    out.set_cookie(API_KEY_COOKIE, key, httponly=True, samesite="strict", path="/")
    return out


@router.get("/ui/runs", include_in_schema=False)
async def ui_runs(
    svc: Svc,
    target: Annotated[Alias | None, Query()] = None,
    state: RunState | None = None,
    tag: TagFilter = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> HTMLResponse:
    key, _, value = tag.partition("=") if tag is not None else ("", "", "")
    runs, _ = await asyncio.to_thread(
        svc.list_runs,
        target=target,
        state=state,
        tag=(key, value) if tag is not None else None,
        limit=limit,
    )
    filters = {"target": target or "", "state": state.value if state else "", "tag": tag or ""}
    runs = await asyncio.to_thread(_with_aggregates, svc, runs)
    return HTMLResponse(ui.runs_page(runs, filters, [s.value for s in RunState]))


def _with_aggregates(svc: RunService, runs: list[dict[str, object]]) -> list[dict[str, object]]:
    """Each run with its steps' aggregates (one query per run, in its partition), for the
    list's IOPS and latency columns."""
    out = []
    for r in runs:
        aggs = sorted(svc.store.results.list_aggregates(str(r["id"])), key=lambda a: a.step)
        steps = [{"clients": a.clients} for a in aggs]
        out.append({**r, "aggregate": aggs[-1].doc() if aggs else None, "steps": steps})
    return out


@router.get("/ui/runs/{run_id}", include_in_schema=False)
async def ui_run(run_id: RunId, svc: Svc) -> HTMLResponse:
    report = await asyncio.to_thread(gather_run, svc, run_id)
    return HTMLResponse(await asyncio.to_thread(run_page, report, nav=True))


@router.get("/ui/compare", include_in_schema=False)
async def ui_compare(run: CompareRuns, svc: Svc, monitor: Monitoring) -> HTMLResponse:
    return HTMLResponse(await asyncio.to_thread(_compare_page, svc, monitor, run, True))


@router.get("/ui/series", include_in_schema=False)
async def ui_series(monitor: Monitoring) -> HTMLResponse:
    found = await asyncio.to_thread(monitor.list_series)
    return HTMLResponse(ui.series_list_page([s.model_dump(mode="json") for s in found]))


@router.get("/ui/series/{key}", include_in_schema=False)
async def ui_one_series(key: SeriesKey, monitor: Monitoring) -> HTMLResponse:
    return HTMLResponse(series_page(series_report(await _series(monitor, key)), nav=True))


@router.get("/ui/regressions", include_in_schema=False)
async def ui_regressions(monitor: Monitoring, state: TriageState | None = None) -> HTMLResponse:
    found = await asyncio.to_thread(monitor.regressions, state)
    return HTMLResponse(ui.regressions_page([r.model_dump(mode="json") for r in found]))
