"""The HTTP API as an ASGI app: uvicorn locally, AsgiFunctionApp in Azure.

The app is assembled from routers, one per door; each route receives the service's parts
as FastAPI dependencies (functions/params.py) from the :class:`~functions.context.Services`
the app is created with.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from functions import (
    admin_api,
    agent_api,
    bot,
    clean_api,
    errors,
    fleet_api,
    health_api,
    live_api,
    messages,
    monitoring_api,
    openapi,
    reports_api,
    runs_api,
    signin,
    telemetry,
    timers,
)
from functions.context import Services, current

DESCRIPTION = (
    "Storage benchmarks as a service: runs, results, schedules, series and regressions, the "
    "agents' protocol and the chat doors. Every error is "
    '`{"errors": [{"field", "message"}]}`; no input gets a 5xx (503: a backing service '
    "failed, retry)."
)
ROUTERS = (
    health_api.router,
    runs_api.router,
    monitoring_api.router,
    reports_api.router,
    live_api.router,
    agent_api.router,
    agent_api.results,
    fleet_api.router,
    clean_api.router,
    bot.router,
    messages.router,
    admin_api.router,
)


def _parts(app: FastAPI) -> Services:
    given: Services | None = app.state.services
    return given if given is not None else current()


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # The SDK calls block; the default pool (CPUs + 4 threads) queued the polls of 16 agents
    # at a step's start behind each other for seconds.
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=64, thread_name_prefix="api")
    )
    parts = _parts(app)
    interval = parts.settings.local_timer_seconds
    task = None
    if interval > 0:
        pace: timers.LocalPace = app.state.pace
        pace.interval_s = interval
        task = asyncio.create_task(timers.local_timer_loop(parts, pace))
    if parts.settings.bot_app_id:
        # The Agents SDK takes seconds to import: not on the first activity's clock.
        asyncio.get_running_loop().run_in_executor(None, parts.teams_host)
    try:
        yield
    finally:
        if task:
            task.cancel()


class _Used:
    """Tells the local timer the API is in use (functions.timers.LocalPace): plain ASGI, so
    it costs a request a clock read."""

    def __init__(self, app: ASGIApp, pace: timers.LocalPace) -> None:
        self.app = app
        self.pace = pace

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.pace.used()
        await self.app(scope, receive, send)


def create_app(services: Services | None = None) -> FastAPI:
    """The API over ``services`` (default: the process's, built from the environment on
    first use, which the Functions timers share)."""
    app = FastAPI(
        title="Storage benchmark service",
        version="0.1.0",
        lifespan=_lifespan,
        openapi_url="/api/openapi.json",
        docs_url=None,  # served from local assets: functions/reports_api.py
        redoc_url=None,
        description=DESCRIPTION,
    )
    app.state.services = services
    app.state.pace = timers.LocalPace(0.0)
    app.add_middleware(_Used, pace=app.state.pace)
    errors.install(app)
    openapi.install(app)
    app.add_middleware(signin.Authenticate)
    reports_api.mount_docs(app)
    for router in ROUTERS:
        app.include_router(router)
    telemetry.instrument(app, lambda: _parts(app))  # traces and operator metrics, when set
    return app
