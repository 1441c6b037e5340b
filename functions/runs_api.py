"""Runs: submit, list, read, cancel; a run's curves and one client's full result; two runs
compared."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from asyncio import FIRST_COMPLETED
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Query, Response

from core.errors import FieldError, Forbidden, StoreUnavailable
from core.models import RUN_ID_PATTERN, TAG_KEY_PATTERN, Alias, FullResult, RunRequest
from core.models.answers import Comparison, Curves
from core.models.state import RunState
from core.models.views import RunAccepted, RunList, RunSummary, RunView
from core.runs.commit import ANSWER_MS, Answer
from core.runs.views import public_run
from functions.inputs import Continuation
from functions.openapi import LOCATION, SIGNED_IN, doc
from functions.params import (
    STORE,
    CallerOf,
    DoorHeader,
    ItemId,
    JsonRoute,
    Monitoring,
    RunId,
    Svc,
    documented_as,
)

log = logging.getLogger(__name__)
router = APIRouter(route_class=JsonRoute, tags=["runs"], **SIGNED_IN)
# Validated by the core (core.runs.intake), as a run request from every other door.
RunRequestAsSent = Annotated[Any, documented_as(RunRequest), Body()]


def _settle(committed: asyncio.Future[None]) -> None:
    if not committed.done():
        committed.set_result(None)


def _answered_early(answer: Answer) -> bool:
    """Whether the POST is answered before its intake ends: this request's creation, whose
    first step's messages are all out. A waiting or provisioning run, and a replay, are
    answered when the call ends, as before."""
    return answer.committed and answer.created and answer.sent and answer.run is not None


async def _finished(
    work: asyncio.Future[tuple[RunSummary, bool]], answer: Answer, left_s: float
) -> tuple[RunSummary, bool]:
    """The intake's own answer, or at the deadline 503 unless it committed meanwhile (then
    202, or 200 for a replay, with the run as committed)."""
    try:
        return await asyncio.wait_for(asyncio.shield(work), left_s)
    except TimeoutError:
        if answer.abandon():  # the intake goes on alone and voids what it stores late
            raise StoreUnavailable(
                f"no answer within {ANSWER_MS / 1000:g} s", "Cosmos DB"
            ) from None
        assert answer.run is not None  # committed: 202 (200 for a replay) whatever follows
        return public_run(answer.run), answer.created


def _retrieved(work: asyncio.Future[Any]) -> None:
    if not work.cancelled() and work.exception() is not None:
        log.info("intake ended: %s", work.exception())


@router.post(
    "/api/runs",
    **doc(
        RunAccepted,
        status=202,
        also={200: RunAccepted},
        headers=LOCATION,
        body=True,
        errors=(400, 403, 409, *STORE),
    ),
)
async def create_run(
    body: RunRequestAsSent,
    svc: Svc,
    caller: CallerOf,
    response: Response,
    idempotency_key: Annotated[
        str | None,
        Header(max_length=200, description="same key and body: the same run (200)"),
    ] = None,
    x_bench_door: DoorHeader = None,
) -> RunAccepted:
    """202 for a new run, 200 for a replay of the same Idempotency-Key and body. 503
    within ANSWER_MS when the database does not answer in time: that run never runs
    (core.runs.commit). A new run is answered once its first step's messages are all out:
    the writes that record it (the step marked sent, the run's outbox closed) follow the
    answer in the intake's thread, and the timer does what that thread does not."""
    loop = asyncio.get_running_loop()
    committed: asyncio.Future[None] = loop.create_future()

    def heard() -> None:  # from the intake's thread, once the first step's messages are out
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(_settle, committed)

    answer = Answer(int(time.time() * 1000) + ANSWER_MS, time.time, heard)
    work = asyncio.ensure_future(
        asyncio.to_thread(svc.submit, body, idempotency_key, caller, answer)
    )
    work.add_done_callback(_retrieved)  # what it raises after a 503 is logged there
    deadline = loop.time() + ANSWER_MS / 1000
    either: list[asyncio.Future[Any]] = [work, committed]
    await asyncio.wait(either, timeout=ANSWER_MS / 1000, return_when=FIRST_COMPLETED)
    if not work.done() and _answered_early(answer):
        assert answer.run is not None  # committed
        run, created = public_run(answer.run), True
    else:
        run, created = await _finished(work, answer, max(0.0, deadline - loop.time()))
    location = f"/api/runs/{run.id}"
    response.status_code = 202 if created else 200
    response.headers["Location"] = location
    return RunAccepted(
        id=run.id, state=run.state, location=location, queue_position=run.queue_position
    )


@router.get("/api/runs", **doc(RunList, errors=(400, 404, *STORE)))
async def list_runs(
    svc: Svc,
    target: Annotated[Alias | None, Query()] = None,
    state: RunState | None = None,
    tag: Annotated[
        str | None,
        Query(description="key=value", pattern=rf"{TAG_KEY_PATTERN[:-1]}=.{{0,256}}$"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    continuation: Continuation = None,
) -> RunList:
    key, _, value = tag.partition("=") if tag is not None else ("", "", "")
    return await asyncio.to_thread(
        svc.list_runs,
        target=target,
        state=state,
        tag=(key, value) if tag is not None else None,
        limit=limit,
        continuation=continuation,
    )


@router.get("/api/runs/{run_id}", **doc(RunView, errors=(400, 404, *STORE)))
async def get_run(run_id: RunId, svc: Svc) -> RunView:
    return await asyncio.to_thread(svc.get_run, run_id)


@router.get("/api/runs/{run_id}/curves", **doc(Curves, errors=(400, 404, *STORE)))
async def curves(run_id: RunId, svc: Svc) -> Curves:
    """Latency vs IOPS, aggregate vs clients (with linear scaling), repetition spread."""
    return await asyncio.to_thread(svc.curves, run_id)


@router.get("/api/compare", **doc(Comparison, errors=(400, 404, *STORE)))
async def compare(
    svc: Svc,
    monitor: Monitoring,
    a: Annotated[str, Query(pattern=RUN_ID_PATTERN)],
    b: Annotated[str, Query(pattern=RUN_ID_PATTERN)],
) -> Comparison:
    """Two runs' final aggregates side by side; each delta judged against the noise
    (coefficient of variation) of run A's series."""
    run_a, run_b = await asyncio.gather(
        asyncio.to_thread(svc.get_run, a), asyncio.to_thread(svc.get_run, b)
    )
    return await asyncio.to_thread(monitor.compare, run_a, run_b)


@router.delete("/api/runs/{run_id}", **doc(RunSummary, status=202, errors=(400, 403, 404, *STORE)))
async def cancel_run(run_id: RunId, svc: Svc, caller: CallerOf) -> RunSummary:
    """Runners cancel their own runs, engineers and admins any (403 naming
    ``requested_by.name`` otherwise)."""
    if caller.limits.max_clients == 0:
        raise Forbidden([FieldError("(caller)", f"role {caller.role} may not cancel runs")])
    return await asyncio.to_thread(svc.cancel, run_id, caller)


@router.get("/api/runs/{run_id}/results/{item_id}", **doc(FullResult, errors=(400, 404, *STORE)))
async def get_result(
    run_id: RunId,
    item_id: ItemId,
    svc: Svc,
    window: Annotated[
        Literal["own", "common"],
        Query(
            description="the per-second series over the client's own measured period, "
            "or over its step's common window (the same seconds for every client)"
        ),
    ] = "own",
) -> FullResult:
    """One client's result with its per-second series and the engine's own output."""
    common = window == "common"
    return await asyncio.to_thread(svc.full_result, run_id, item_id, common=common)
