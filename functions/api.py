"""The HTTP API as an ASGI app: uvicorn locally, AsgiFunctionApp in Azure.

Bodies are read raw and validated against ``core/schemas/`` so that a bad request gets one 400
listing every violation by field path, before anything is written or enqueued.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Header, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.middleware.base import RequestResponseEndpoint

from core.catalogue import PROFILES, get_profile
from core.errors import BenchError, FieldError, Forbidden, NotFound, StoreUnavailable
from core.models import (
    RUN_ID_PATTERN,
    TAG_KEY_PATTERN,
    Alias,
    RunRequest,
)
from core.models.state import RunState
from core.monitoring.monitor import TriageState
from core.runs.commit import ANSWER_MS, Answer
from core.runs.timer import TIMERS, tick_check
from core.runs.views import public_run
from functions import (
    admin_api,
    agent_api,
    bot,
    context,
    errors,
    fleet_api,
    live_api,
    messages,
    openapi,
    reports_api,
    telemetry,
    timers,
)
from functions import apidocs as d
from functions import apidocs_monitoring as m
from functions.auth import Unauthorized, resolve_caller
from functions.clean_api import router as clean_router
from functions.inputs import Continuation
from functions.openapi import BOT_MESSAGES, LOCATION, PUBLIC_PATHS, doc
from functions.params import (
    STORE,
    DoorHeader,
    ItemId,
    ProfileName,
    RegressionId,
    RunId,
    ScheduleId,
    SeriesKey,
    caller_of,
    json_body,
    svc,
)

log = logging.getLogger(__name__)
HEALTH_WAIT_S = 4.0  # the database's share of /api/health's 5 s
STARTED_MS = int(time.time() * 1000)  # a timer not recorded yet is stale only after a while


def _read_ticks() -> dict[str, int | None]:
    store = context.store()
    store.ping()
    return {name: store.ticks.get(name) for name in TIMERS}


def _retrieved(work: asyncio.Future[Any]) -> None:
    if not work.cancelled() and work.exception() is not None:
        log.info("intake ended: %s", work.exception())


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def _must_manage(request: Request) -> None:
    caller = caller_of(request)
    if not caller.limits.manage:
        raise Forbidden([FieldError("(caller)", f"role {caller.role} may not change this")])


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # The SDK calls block; the default pool (CPUs + 4 threads) queued the polls of 16 agents
    # at a step's start behind each other for seconds.
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=64, thread_name_prefix="api")
    )
    interval = context.settings().local_timer_seconds
    task = asyncio.create_task(timers.local_timer_loop(interval)) if interval > 0 else None
    if context.settings().bot_app_id:
        # The Agents SDK takes seconds to import: not on the first activity's clock.
        asyncio.get_running_loop().run_in_executor(None, context.teams_host)
    try:
        yield
    finally:
        if task:
            task.cancel()


def create_app() -> FastAPI:
    app = FastAPI(
        title="Storage benchmark service",
        version="0.1.0",
        lifespan=_lifespan,
        openapi_url="/api/openapi.json",
        docs_url=None,  # served from local assets: functions/reports_api.py
        redoc_url=None,
        description="Storage benchmarks as a service: runs, results, schedules, series and "
        "regressions, the agents' protocol and the chat doors. Every error is "
        '`{"errors": [{"field", "message"}]}`; no input gets a 5xx (503: a backing service '
        "failed, retry).",
    )
    errors.install(app)
    openapi.install(app)

    @app.middleware("http")
    async def authenticate(request: Request, call_next: RequestResponseEndpoint) -> Response:
        path = request.url.path
        ui = path == "/ui" or path.startswith("/ui/")
        if (
            path in PUBLIC_PATHS
            or path == BOT_MESSAGES  # the channel's token, checked by functions/messages.py
            or path.startswith(("/api/bot/", "/api/docs/assets/"))
            or not (path.startswith("/api/") or ui)
            or path == "/ui/signin"
        ):
            return await call_next(request)
        try:
            get = request.method == "GET"
            caller = resolve_caller(request.headers, context.settings(), allow_cookie=get)
        except Unauthorized as e:
            if ui and e.status == 401:  # a person: to the sign-in form
                return RedirectResponse("/ui/signin?error=true", status_code=303)
            return errors.error_response(e.status, [FieldError(e.field, str(e))])
        if path.startswith("/api/agent/") and not caller.is_agent:
            return errors.error_response(403, [FieldError("(caller)", "agents only")])
        request.state.caller = caller
        return await call_next(request)

    @app.get("/api/health", **doc(d.Health, also={503: d.Health}))
    async def health() -> JSONResponse:
        """The database answers, and each timer completed a tick recently (the last one is
        recorded in the database, so every API instance judges the same timers)."""
        checks: dict[str, str] = {}
        timers: dict[str, dict[str, Any]] = {}
        try:
            # Whatever the database does, health answers within 5 s (issue 12.2).
            ticks = await asyncio.wait_for(asyncio.to_thread(_read_ticks), HEALTH_WAIT_S)
            checks["cosmos"] = "ok"
        except BenchError as e:
            checks["cosmos"] = f"error: {e}"
        except TimeoutError:
            checks["cosmos"] = f"error: no answer within {HEALTH_WAIT_S:g} s"
        else:
            now = int(time.time() * 1000)
            stale_s = context.settings().timer_stale_s
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

    @app.post(
        "/api/runs",
        **doc(
            d.RunAccepted,
            status=202,
            also={200: d.RunAccepted},
            headers=LOCATION,
            body=RunRequest,
            errors=(400, 403, 409, *STORE),
        ),
    )
    async def create_run(
        request: Request,
        idempotency_key: Annotated[
            str | None,
            Header(max_length=200, description="same key and body: the same run (200)"),
        ] = None,
        x_bench_door: DoorHeader = None,
    ) -> JSONResponse:
        """202 for a new run, 200 for a replay of the same Idempotency-Key and body. 503
        within ANSWER_MS when the database does not answer in time: that run never runs
        (core.runs.commit)."""
        body = await json_body(request)
        answer = Answer(int(time.time() * 1000) + ANSWER_MS, time.time)
        work = asyncio.ensure_future(
            asyncio.to_thread(svc().submit, body, idempotency_key, caller_of(request), answer)
        )
        work.add_done_callback(_retrieved)  # what it raises after a 503 is logged there
        try:
            run, created = await asyncio.wait_for(asyncio.shield(work), ANSWER_MS / 1000)
        except TimeoutError:
            if answer.abandon():  # the intake goes on alone and voids what it stores late
                raise StoreUnavailable(
                    f"no answer within {ANSWER_MS / 1000:g} s", "Cosmos DB"
                ) from None
            assert answer.run is not None  # committed: stored in time, 202 whatever follows
            run, created = public_run(answer.run), True
        location = f"/api/runs/{run['id']}"
        out = {"id": run["id"], "state": run["state"], "location": location}
        if "queue_position" in run:
            out["queue_position"] = run["queue_position"]
        return JSONResponse(
            out,
            status_code=202 if created else 200,
            headers={"Location": location},
        )

    @app.get("/api/runs", **doc(d.RunList, errors=(400, 404, *STORE)))
    async def list_runs(
        target: Annotated[Alias | None, Query()] = None,
        state: RunState | None = None,
        tag: Annotated[
            str | None,
            Query(description="key=value", pattern=rf"{TAG_KEY_PATTERN[:-1]}=.{{0,256}}$"),
        ] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        continuation: Continuation = None,
    ) -> dict[str, Any]:
        key, _, value = tag.partition("=") if tag is not None else ("", "", "")
        runs, token = await asyncio.to_thread(
            svc().list_runs,
            target=target,
            state=state,
            tag=(key, value) if tag is not None else None,
            limit=limit,
            continuation=continuation,
        )
        return {"runs": runs, "continuation": token}

    @app.get("/api/runs/{run_id}", **doc(d.RunView, errors=(400, 404, *STORE)))
    async def get_run(run_id: RunId) -> dict[str, Any]:
        return await asyncio.to_thread(svc().get_run, run_id)

    @app.get("/api/runs/{run_id}/curves", **doc(d.Curves, errors=(400, 404, *STORE)))
    async def curves(run_id: RunId) -> dict[str, Any]:
        """Latency vs IOPS, aggregate vs clients (with linear scaling), repetition spread."""
        return await asyncio.to_thread(svc().curves, run_id)

    @app.get("/api/compare", **doc(m.Comparison, errors=(400, 404, *STORE)))
    async def compare(
        a: Annotated[str, Query(pattern=RUN_ID_PATTERN)],
        b: Annotated[str, Query(pattern=RUN_ID_PATTERN)],
    ) -> dict[str, Any]:
        """Two runs' final aggregates side by side; each delta judged against the noise
        (coefficient of variation) of run A's series."""
        run_a, run_b = await asyncio.gather(
            asyncio.to_thread(svc().get_run, a), asyncio.to_thread(svc().get_run, b)
        )
        return await asyncio.to_thread(context.monitor().compare, run_a, run_b)

    @app.get("/api/targets", **doc(m.TargetList, errors=STORE))
    async def targets() -> dict[str, Any]:
        """The target registry (BENCH_TARGETS) with who holds each target and who waits."""
        registry = list(context.settings().targets)
        return {"targets": await asyncio.to_thread(svc().views.targets, registry)}

    @app.post(
        "/api/schedules",
        **doc(m.ScheduleView, status=201, body=m.ScheduleBody, errors=(400, 403, *STORE)),
    )
    async def create_schedule(request: Request) -> dict[str, Any]:
        """A cron expression (UTC), a run request template, enabled, owner."""
        _must_manage(request)
        return await asyncio.to_thread(context.scheduler().create, await json_body(request))

    @app.get("/api/schedules", **doc(m.ScheduleList, errors=STORE))
    async def list_schedules() -> dict[str, Any]:
        return {"schedules": await asyncio.to_thread(context.scheduler().list_all)}

    @app.get("/api/schedules/{schedule_id}", **doc(m.ScheduleView, errors=(400, 404, *STORE)))
    async def get_schedule(schedule_id: ScheduleId) -> dict[str, Any]:
        return await asyncio.to_thread(context.scheduler().get, schedule_id)

    @app.patch(
        "/api/schedules/{schedule_id}",
        **doc(m.ScheduleView, body=m.SchedulePatchBody, errors=(400, 403, 404, 409, *STORE)),
    )
    async def patch_schedule(schedule_id: ScheduleId, request: Request) -> dict[str, Any]:
        """Engineers and admins change any schedule; runners enable, disable or rename
        their own (``owner``): 403 naming the field otherwise."""
        body = await json_body(request)
        return await asyncio.to_thread(
            context.scheduler().patch, schedule_id, body, caller_of(request)
        )

    @app.delete(
        "/api/schedules/{schedule_id}", **doc(None, status=204, errors=(400, 403, 404, *STORE))
    )
    async def delete_schedule(schedule_id: ScheduleId, request: Request) -> Response:
        """Engineers and admins delete any schedule; runners their own (``owner``)."""
        await asyncio.to_thread(context.scheduler().delete, schedule_id, caller_of(request))
        return Response(status_code=204)

    @app.get("/api/series", **doc(m.SeriesList, errors=STORE))
    async def list_series() -> dict[str, Any]:
        return {"series": await asyncio.to_thread(context.monitor().list_series)}

    @app.get("/api/series/{key}", **doc(m.SeriesHistory, errors=(400, 404, *STORE)))
    async def series(key: SeriesKey) -> dict[str, Any]:
        """History (time, run, IOPS, bandwidth, p50/p99/p99.9 per direction), infrastructure
        segments, regressions and improvements found."""
        found = await asyncio.to_thread(context.monitor().history, key)
        if not found["history"]:
            raise NotFound(f"series {key}")
        return found

    @app.get("/api/regressions", **doc(m.RegressionList, errors=(400, *STORE)))
    async def regressions(state: TriageState | None = None) -> dict[str, Any]:
        return {"regressions": await asyncio.to_thread(context.monitor().regressions, state)}

    @app.patch(
        "/api/regressions/{key}/{regression_id}",
        **doc(m.Regression, body=m.TriageBody, errors=(400, 403, 404, 409, *STORE)),
    )
    async def triage(key: SeriesKey, regression_id: RegressionId, request: Request) -> Any:
        """Engineers and admins triage any regression; runners those first seen on their
        own runs (403 naming ``first_run_id`` otherwise)."""
        body = await json_body(request)
        state = body.get("state") if isinstance(body, dict) else None
        return await asyncio.to_thread(
            context.monitor().triage, key, regression_id, str(state), caller_of(request)
        )

    @app.get("/api/profiles", **doc(m.ProfileList))
    async def profiles() -> dict[str, Any]:
        return {"profiles": [p.describe() for p in PROFILES]}

    @app.get("/api/profiles/{name}", **doc(m.ProfileView, errors=(400, 404)))
    async def profile(name: ProfileName) -> dict[str, Any]:
        try:
            return get_profile(name).describe()
        except KeyError as e:
            raise NotFound(str(e.args[0])) from None

    @app.delete(
        "/api/runs/{run_id}", **doc(d.RunSummary, status=202, errors=(400, 403, 404, *STORE))
    )
    async def cancel_run(run_id: RunId, request: Request) -> dict[str, Any]:
        """Runners cancel their own runs, engineers and admins any (403 naming
        ``requested_by.name`` otherwise)."""
        caller = caller_of(request)
        if caller.limits.max_clients == 0:
            raise Forbidden([FieldError("(caller)", f"role {caller.role} may not cancel runs")])
        return await asyncio.to_thread(svc().cancel, run_id, caller)

    @app.get("/api/runs/{run_id}/results/{item_id}", **doc(d.FullResult, errors=(400, 404, *STORE)))
    async def get_result(
        run_id: RunId,
        item_id: ItemId,
        window: Annotated[
            Literal["own", "common"],
            Query(
                description="the per-second series over the client's own measured period, "
                "or over its step's common window (the same seconds for every client)"
            ),
        ] = "own",
    ) -> dict[str, Any]:
        """One client's result with its per-second series and the engine's own output."""
        common = window == "common"
        return await asyncio.to_thread(svc().full_result, run_id, item_id, common=common)

    reports_api.mount_docs(app)
    app.include_router(reports_api.router)
    app.include_router(live_api.router)
    app.include_router(agent_api.router)
    app.include_router(fleet_api.router)
    app.include_router(clean_router)
    app.include_router(bot.router)
    app.include_router(messages.router)
    app.include_router(admin_api.router)
    telemetry.instrument(app)  # traces and operator metrics, when configured
    return app
