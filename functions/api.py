"""The HTTP API as an ASGI app: uvicorn locally, AsgiFunctionApp in Azure.

Bodies are read raw and validated against ``schemas/`` so that a bad request gets one 400
listing every violation by field path, before anything is written or enqueued.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, get_args

from fastapi import FastAPI, Header, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticError
from starlette.middleware.base import RequestResponseEndpoint

from core.catalogue import PROFILES, get_profile
from core.errors import (
    BenchError,
    Conflict,
    FieldError,
    NotFound,
    StoreUnavailable,
    TooLarge,
    ValidationFailed,
)
from core.guardrails import LOCAL_CALLER, Caller, Forbidden
from core.holder import AgentRef
from core.models import WorkItem
from core.runstate import RunState
from core.service import BarrierDecision, RunService
from core.validation import schema_path
from functions import bot, context, timers
from functions.auth import Unauthorized, agent_ref, resolve_caller

log = logging.getLogger(__name__)
RUN_STATES: tuple[str, ...] = get_args(RunState)


def _svc() -> RunService:
    return context.service()


# Open to anyone: liveness and the API's description. The bot routes check HMAC themselves.
PUBLIC_PATHS = frozenset({"/api/health", "/api/openapi.json", "/api/docs"})


def _caller(request: Request) -> Caller:
    caller: Caller = getattr(request.state, "caller", LOCAL_CALLER)
    return caller


def _must_manage(request: Request) -> None:
    caller = _caller(request)
    if not caller.limits.manage:
        raise Forbidden([FieldError("(caller)", f"role {caller.role} may not change this")])


class _AgentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent_id: str = Field(min_length=1, max_length=128)


class ClaimBody(_AgentBody):
    work_item: WorkItem
    dequeue_count: int = Field(ge=1)
    message_id: str = Field("", max_length=128)


class ItemRef(_AgentBody):
    run_id: str
    item_id: str


class FailureBody(ItemRef):
    message: str = Field(max_length=8000)
    # Keys the report, so that a retried report is recorded once (a uuid per report).
    report_id: str | None = Field(None, min_length=1, max_length=64)
    permanent: bool = Field(
        False, description="no retry can succeed: the item fails at once, not redelivered"
    )


def _agent(request: Request, agent_id: str) -> AgentRef:
    """The reporting agent, as its credential proves it (403 naming agent_id otherwise)."""
    return agent_ref(_caller(request), agent_id)


def _parse(model: type[BaseModel], body: Any) -> Any:
    try:
        return model.model_validate(body)
    except PydanticError as e:
        raise ValidationFailed(
            [
                FieldError(".".join(str(p) for p in err["loc"]) or "(body)", str(err["msg"]))
                for err in e.errors()
            ]
        ) from None


async def _json(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw or b"null")
    except json.JSONDecodeError as e:
        raise ValidationFailed([FieldError("(body)", f"not valid JSON: {e.msg}")]) from None


def _errors(status: int, errors: list[dict[str, str]]) -> JSONResponse:
    return JSONResponse({"errors": errors}, status_code=status)


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # The SDK calls block; the default pool (CPUs + 4 threads) queued the polls of 16 agents
    # at a step's start behind each other for seconds.
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=64, thread_name_prefix="api")
    )
    interval = context.settings().local_timer_seconds
    task = asyncio.create_task(timers.local_timer_loop(interval)) if interval > 0 else None
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
        docs_url="/api/docs",
        redoc_url=None,
    )

    @app.middleware("http")
    async def authenticate(request: Request, call_next: RequestResponseEndpoint) -> Response:
        path = request.url.path
        if path in PUBLIC_PATHS or path.startswith("/api/bot/") or not path.startswith("/api/"):
            return await call_next(request)
        try:
            caller = resolve_caller(request.headers, context.settings())
        except Unauthorized as e:
            return _errors(e.status, [{"field": e.field, "message": str(e)}])
        if path.startswith("/api/agent/") and not caller.is_agent:
            return _errors(403, [{"field": "(caller)", "message": "agents only"}])
        request.state.caller = caller
        return await call_next(request)

    @app.exception_handler(Forbidden)
    async def _forbidden(_: Request, e: Forbidden) -> JSONResponse:
        return _errors(403, [x.as_dict() for x in e.errors])

    @app.exception_handler(ValidationFailed)
    async def _bad(_: Request, e: ValidationFailed) -> JSONResponse:
        return _errors(400, [x.as_dict() for x in e.errors])

    @app.exception_handler(NotFound)
    async def _missing(_: Request, e: NotFound) -> JSONResponse:
        return _errors(404, [{"field": "(path)", "message": f"not found: {e}"}])

    @app.exception_handler(Conflict)
    async def _conflict(_: Request, e: Conflict) -> JSONResponse:
        return _errors(409, [{"field": "(request)", "message": str(e)}])

    @app.exception_handler(TooLarge)
    async def _too_large(_: Request, e: TooLarge) -> JSONResponse:
        return _errors(413, [{"field": "(body)", "message": str(e)}])

    @app.exception_handler(StoreUnavailable)
    async def _down(_: Request, e: StoreUnavailable) -> JSONResponse:
        log.error("backing service failed: %s", e)
        return _errors(503, [{"field": "(service)", "message": "storage unavailable, retry"}])

    @app.exception_handler(BenchError)
    async def _other(_: Request, e: BenchError) -> JSONResponse:
        log.error("request failed: %s", e)
        return _errors(500, [{"field": "(service)", "message": str(e)}])

    run_request_schema = json.loads(schema_path("run-request").read_text())

    @app.get("/api/health")
    async def health() -> JSONResponse:
        checks: dict[str, str] = {}
        try:
            await asyncio.to_thread(context.store().ping)
            checks["cosmos"] = "ok"
        except BenchError as e:
            checks["cosmos"] = f"error: {e}"
        ok = all(v == "ok" for v in checks.values())
        return JSONResponse(
            {"status": "ok" if ok else "degraded", "checks": checks}, status_code=200 if ok else 503
        )

    @app.post(
        "/api/runs",
        status_code=202,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": run_request_schema}},
            },
            "responses": {"400": {"description": "Every invalid field, by path"}},
        },
    )
    async def create_run(
        request: Request,
        idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
    ) -> JSONResponse:
        body = await _json(request)
        run, created = await asyncio.to_thread(
            _svc().submit, body, idempotency_key, _caller(request)
        )
        location = f"/api/runs/{run['id']}"
        out = {"id": run["id"], "state": run["state"], "location": location}
        if "queue_position" in run:
            out["queue_position"] = run["queue_position"]
        return JSONResponse(
            out,
            status_code=202 if created else 200,
            headers={"Location": location},
        )

    @app.get("/api/runs")
    async def list_runs(
        target: str | None = None,
        state: str | None = None,
        tag: Annotated[str | None, Query(description="key=value")] = None,
        limit: Annotated[int, Query()] = 50,
        continuation: str | None = None,
    ) -> dict[str, Any]:
        errors = []
        if state is not None and state not in RUN_STATES:
            errors.append(FieldError("state", f"must be one of {', '.join(RUN_STATES)}"))
        if not 1 <= limit <= 200:
            errors.append(FieldError("limit", "must be between 1 and 200"))
        tag_pair = None
        if tag is not None:
            key, sep, value = tag.partition("=")
            if not sep or not key:
                errors.append(FieldError("tag", "must look like key=value"))
            tag_pair = (key, value)
        if errors:
            raise ValidationFailed(errors)
        runs, token = await asyncio.to_thread(
            _svc().list_runs,
            target=target,
            state=state,
            tag=tag_pair,
            limit=limit,
            continuation=continuation,
        )
        return {"runs": runs, "continuation": token}

    @app.get("/api/runs/{run_id}")
    async def get_run(run_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(_svc().get_run, run_id)

    @app.get("/api/runs/{run_id}/curves")
    async def curves(run_id: str) -> dict[str, Any]:
        """Latency vs IOPS, aggregate vs clients (with linear scaling), repetition spread."""
        return await asyncio.to_thread(_svc().curves, run_id)

    @app.get("/api/compare")
    async def compare(a: str, b: str) -> dict[str, Any]:
        """Two runs' final aggregates side by side; each delta judged against the noise
        (coefficient of variation) of run A's series."""
        run_a, run_b = await asyncio.gather(
            asyncio.to_thread(_svc().get_run, a), asyncio.to_thread(_svc().get_run, b)
        )
        return await asyncio.to_thread(context.monitor().compare, run_a, run_b)

    @app.get("/api/targets")
    async def targets() -> dict[str, Any]:
        """The target registry (BENCH_TARGETS) with who holds each target and who waits."""
        reply = await asyncio.to_thread(context.bot().list_targets)
        return {"targets": reply.data.get("targets", [])}

    @app.post("/api/schedules", status_code=201)
    async def create_schedule(request: Request) -> dict[str, Any]:
        """A cron expression (UTC), a run request template, enabled, owner."""
        _must_manage(request)
        return await asyncio.to_thread(context.scheduler().create, await _json(request))

    @app.get("/api/schedules")
    async def list_schedules() -> dict[str, Any]:
        return {"schedules": await asyncio.to_thread(context.scheduler().list_all)}

    @app.get("/api/schedules/{schedule_id}")
    async def get_schedule(schedule_id: str) -> dict[str, Any]:
        return await asyncio.to_thread(context.scheduler().get, schedule_id)

    @app.patch("/api/schedules/{schedule_id}")
    async def patch_schedule(schedule_id: str, request: Request) -> dict[str, Any]:
        """Engineers and admins change any schedule; runners enable, disable or rename
        their own (``owner``): 403 naming the field otherwise."""
        body = await _json(request)
        return await asyncio.to_thread(
            context.scheduler().patch, schedule_id, body, _caller(request)
        )

    @app.delete("/api/schedules/{schedule_id}", status_code=204)
    async def delete_schedule(schedule_id: str, request: Request) -> Response:
        """Engineers and admins delete any schedule; runners their own (``owner``)."""
        await asyncio.to_thread(context.scheduler().delete, schedule_id, _caller(request))
        return Response(status_code=204)

    @app.get("/api/series")
    async def list_series() -> dict[str, Any]:
        return {"series": await asyncio.to_thread(context.monitor().list_series)}

    @app.get("/api/series/{key}")
    async def series(key: str) -> dict[str, Any]:
        """History (time, run, IOPS, bandwidth, p50/p99/p99.9 per direction), infrastructure
        segments, regressions and improvements found."""
        found = await asyncio.to_thread(context.monitor().history, key)
        if not found["history"]:
            raise NotFound(f"series {key}")
        return found

    @app.get("/api/regressions")
    async def regressions(state: str | None = None) -> dict[str, Any]:
        return {"regressions": await asyncio.to_thread(context.monitor().regressions, state)}

    @app.patch("/api/regressions/{key}/{regression_id}")
    async def triage(key: str, regression_id: str, request: Request) -> dict[str, Any]:
        """Engineers and admins triage any regression; runners those first seen on their
        own runs (403 naming ``first_run_id`` otherwise)."""
        body = await _json(request)
        state = body.get("state") if isinstance(body, dict) else None
        return await asyncio.to_thread(
            context.monitor().triage, key, regression_id, str(state), _caller(request)
        )

    @app.get("/api/profiles")
    async def profiles() -> dict[str, Any]:
        return {"profiles": [p.describe() for p in PROFILES]}

    @app.get("/api/profiles/{name}")
    async def profile(name: str) -> dict[str, Any]:
        try:
            return get_profile(name).describe()
        except KeyError as e:
            raise NotFound(str(e.args[0])) from None

    @app.delete("/api/runs/{run_id}", status_code=202)
    async def cancel_run(run_id: str, request: Request) -> dict[str, Any]:
        """Runners cancel their own runs, engineers and admins any (403 naming
        ``requested_by.name`` otherwise)."""
        caller = _caller(request)
        if caller.limits.max_clients == 0:
            raise Forbidden([FieldError("(caller)", f"role {caller.role} may not cancel runs")])
        return await asyncio.to_thread(_svc().cancel, run_id, caller)

    @app.get("/api/runs/{run_id}/results/{item_id}")
    async def get_result(run_id: str, item_id: str) -> dict[str, Any]:
        """One client's result with its per-second series and the engine's own output."""
        return await asyncio.to_thread(_svc().full_result, run_id, item_id)

    # ---- agent protocol (agents hold no database rights; the API writes for them) ----

    # Each report is accepted only from the agent holding the item, in a state where it
    # may send it: anything else is 409 and changes nothing (core.holder).

    @app.post("/api/agent/claim")
    async def claim(request: Request) -> dict[str, str]:
        b: ClaimBody = _parse(ClaimBody, await _json(request))
        d = await asyncio.to_thread(
            _svc().claim,
            b.work_item,
            agent=_agent(request, b.agent_id),
            dequeue_count=b.dequeue_count,
            message_id=b.message_id,
        )
        return {"action": d.action, "reason": d.reason}

    def _barrier(d: BarrierDecision) -> dict[str, Any]:
        return {"status": d.status, "start_at_ms": d.start_at_ms, "reason": d.reason}

    @app.post("/api/agent/ready")
    async def ready(request: Request) -> dict[str, Any]:
        b: ItemRef = _parse(ItemRef, await _json(request))
        agent = _agent(request, b.agent_id)
        return _barrier(await asyncio.to_thread(_svc().ready, b.run_id, b.item_id, agent))

    @app.post("/api/agent/barrier")
    async def barrier(request: Request) -> dict[str, Any]:
        b: ItemRef = _parse(ItemRef, await _json(request))
        agent = _agent(request, b.agent_id)
        return _barrier(await asyncio.to_thread(_svc().barrier, b.run_id, b.item_id, agent))

    @app.post("/api/agent/heartbeat")
    async def heartbeat(request: Request) -> dict[str, bool]:
        b: ItemRef = _parse(ItemRef, await _json(request))
        agent = _agent(request, b.agent_id)
        return await asyncio.to_thread(_svc().heartbeat, b.run_id, b.item_id, agent)

    @app.post("/api/agent/failure")
    async def failure(request: Request) -> dict[str, Any]:
        b: FailureBody = _parse(FailureBody, await _json(request))
        agent = _agent(request, b.agent_id)
        final = await asyncio.to_thread(
            _svc().report_failure,
            b.run_id,
            b.item_id,
            agent,
            b.message,
            report_id=b.report_id,
            permanent=b.permanent,
        )
        return {"status": "recorded", "final": final}

    @app.post("/api/agent/cancelled")
    async def cancelled(request: Request) -> dict[str, str]:
        b: ItemRef = _parse(ItemRef, await _json(request))
        agent = _agent(request, b.agent_id)
        await asyncio.to_thread(_svc().report_cancelled, b.run_id, b.item_id, agent)
        return {"status": "recorded"}

    @app.put("/api/agent/artifacts/{item_id}/{name}")
    async def put_artifact(
        item_id: str,
        name: str,
        request: Request,
        agent_id: Annotated[str, Query(min_length=1, max_length=128)],
    ) -> JSONResponse:
        """A large output of an item (gzip): its timeline, the engine's output, its logs;
        from the agent holding the item (``agent_id``), 409 otherwise."""
        run_id = item_id.rsplit(".", 2)[0]
        data = await request.body()
        agent = _agent(request, agent_id)
        size = await asyncio.to_thread(_svc().put_artifact, run_id, item_id, name, data, agent)
        return JSONResponse({"stored": True, "bytes": size}, status_code=201)

    @app.put("/api/agent/results/{item_id}")
    async def put_result(item_id: str, request: Request) -> JSONResponse:
        body = await _json(request)
        if not isinstance(body, dict) or body.get("item_id") != item_id:
            raise ValidationFailed([FieldError("item_id", "must match the URL")])
        claimed = body.get("agent_id")
        if not isinstance(claimed, str) or not claimed:
            raise ValidationFailed([FieldError("agent_id", "required")])
        agent = _agent(request, claimed)
        created = await asyncio.to_thread(_svc().store_result, body, agent)
        return JSONResponse(
            {"stored": True, "duplicate": not created}, status_code=201 if created else 200
        )

    app.include_router(bot.router)
    return app
