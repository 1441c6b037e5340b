"""The agents' protocol: claim, ready, barrier, heartbeat, failure, cancelled, artifacts and
results. Agents hold no database rights; the API writes for them.

Each report is accepted only from the agent holding the item, in a state where it may send
it: anything else is 409 and changes nothing (core.models.holder).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Header, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from core.errors import FieldError, ValidationFailed
from core.models import ITEM_ID_PATTERN, MAX_RTT_MS, RUN_ID_PATTERN, ArtifactName, WorkItem
from core.models import Result as WorkResult
from core.models.ids import step_of_item
from core.models.live import LiveSample
from core.receipts import parse_receipts
from core.runs.barrier_timing import MAX_WAIT_MS, WATCH_MS
from core.runs.barrier_watch import StepWatch
from core.runs.live import MAX_SAMPLES_PER_BEAT
from core.runs.protocol import BarrierDecision
from core.runs.service import RunService
from functions.auth import agent_ref
from functions.openapi import SIGNED_IN, doc
from functions.params import (
    MAX_DOCUMENT_BYTES,
    CallerOf,
    ItemId,
    JsonRoute,
    Svc,
    capped,
    documented_as,
)

router = APIRouter(route_class=JsonRoute, tags=["agent protocol"], **SIGNED_IN)
# A result is stored as one Cosmos DB document: its body may be up to one's size.
results = APIRouter(route_class=capped(MAX_DOCUMENT_BYTES), tags=["agent protocol"], **SIGNED_IN)
AGENT = (400, 404, 409, 503)  # 409: a report from an agent not holding the item


# Validated by the core (core.runs.agent_reports), as a result's every other door.
ResultAsSent = Annotated[Any, documented_as(WorkResult), Body()]
# The receipts the result's artifacts' puts answered (core.receipts), ``name=receipt``
# comma-separated; one that is malformed or does not match is checked in Blob Storage.
ReceiptsHeader = Annotated[
    str | None,
    Header(
        alias="X-Upload-Receipts",
        max_length=2000,
        description="name=receipt,... as the artifacts' puts answered: the artifacts "
        "they match are not checked in Blob Storage again",
    ),
]


class _AgentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agent_id: str = Field(min_length=1, max_length=128)


class ClaimBody(_AgentBody):
    work_item: WorkItem
    dequeue_count: int = Field(ge=1, le=2**31 - 1)  # the queue's DequeueCount is an int32
    message_id: str = Field("", max_length=128)


class ItemRef(_AgentBody):
    run_id: str = Field(pattern=RUN_ID_PATTERN)
    item_id: str = Field(pattern=ITEM_ID_PATTERN)


class ReadyBody(ItemRef):
    rtt_ms: int | None = Field(
        None,
        ge=0,
        le=MAX_RTT_MS,
        description="the agent's slowest recent round trip to the API, ms, or (an agent "
        "in held barrier calls) how long its last go took from the instant's setting "
        "(set_at_ms): the start barrier's lead is derived from the step's agents' values",
    )
    barrier_wait: bool = Field(
        False,
        description="true: from this report on, the agent always has a barrier call held "
        "(wait_ms) at the API until it hears the start, not polling; the lead is shorter "
        "when every client of the step does",
    )
    wait_ms: int = Field(
        0,
        ge=0,
        le=MAX_WAIT_MS,
        description="as a barrier call's: while the answer is wait, hold this report as the "
        "agent's first held barrier call; 0: answer at once",
    )


class BarrierBody(ItemRef):
    wait_ms: int = Field(
        0,
        ge=0,
        le=MAX_WAIT_MS,
        description="while the answer is wait, hold the call until the step's start instant "
        "is set, the step fails or its deadline passes, or for at most this long (then "
        "wait); 0: answer at once",
    )


class HeartbeatBody(ItemRef):
    live: list[LiveSample] = Field(
        default_factory=list,
        max_length=MAX_SAMPLES_PER_BEAT,
        description="live: the agent's last minute of fio's status intervals, sent when "
        "one is new, for the live view (GET /api/runs/{run_id}/live); never the run's figures",
    )
    waiting: bool = Field(
        False,
        description="true: the agent has not heard its step's start instant yet (its item "
        "has not started; the API does not look whether it has)",
    )


class FailureBody(ItemRef):
    message: str = Field(max_length=8000)
    # Keys the report, so that a retried report is recorded once (a uuid per report).
    report_id: str | None = Field(None, min_length=1, max_length=64)
    permanent: bool = Field(
        False, description="no retry can succeed: the item fails at once, not redelivered"
    )


# ---- the replies ----------------------------------------------------------------------------


class ClaimReply(BaseModel):
    action: Literal["run", "drop", "release"] = Field(
        description="run it; drop (delete the message); release (hand it back to the queue)"
    )
    reason: str
    barrier_wait_ms: int = Field(
        MAX_WAIT_MS,
        description="the longest this API holds a barrier call (its wait_ms); an API that "
        "does not send it holds none: the agent polls",
    )
    agent_protocol: int = Field(
        4,
        description="2: this API also holds a ready report sent with wait_ms and takes a "
        "heartbeat's waiting; an API that does not send it refuses both fields. 3: it "
        "also takes a result carrying its timeline (inline_timeline). 4: and its other "
        "small artifacts (inline_artifacts)",
    )


class BarrierReply(BaseModel):
    status: Literal["wait", "go", "abort"]
    start_at_ms: int | None = Field(description="with go: the common start instant, Unix ms")
    reason: str
    set_at_ms: int | None = Field(
        None,
        description="with go at the step's common instant: when the API set it, Unix ms "
        "(the API's clock); the agent times how long its go took to reach it from then",
    )


class HeartbeatReply(BaseModel):
    cancel: bool = Field(description="stop now: the run was cancelled or the item taken over")


class FailureReply(BaseModel):
    status: Literal["recorded"]
    final: bool = Field(description="true: no retry (delete the message)")


class CancelledReply(BaseModel):
    status: Literal["recorded"]


class ArtifactStored(BaseModel):
    stored: Literal[True]
    bytes: int = Field(description="size stored")
    receipt: str = Field(
        "",
        description="the API's receipt for what it stored: sent back with the result "
        "(header X-Upload-Receipts), it spares the check of this artifact in Blob Storage; "
        "empty when none could be made",
    )


class StoredReply(BaseModel):
    stored: Literal[True]
    duplicate: bool = Field(description="true: this item's result was already stored")


@router.post("/api/agent/claim", **doc(ClaimReply, body=True, errors=AGENT))
async def claim(b: ClaimBody, svc: Svc, caller: CallerOf) -> ClaimReply:
    decision = await asyncio.to_thread(
        svc.claim,
        b.work_item,
        agent=agent_ref(caller, b.agent_id),
        dequeue_count=b.dequeue_count,
        message_id=b.message_id,
    )
    return ClaimReply(action=decision.action, reason=decision.reason)


def _barrier(x: BarrierDecision) -> BarrierReply:
    return BarrierReply(
        status=x.status, start_at_ms=x.start_at_ms, reason=x.reason, set_at_ms=x.set_at_ms
    )


@router.post("/api/agent/ready", **doc(BarrierReply, body=True, errors=AGENT))
async def ready(b: ReadyBody, svc: Svc, caller: CallerOf) -> BarrierReply:
    agent = agent_ref(caller, b.agent_id)
    protocol = svc.protocol
    decision, doc = await asyncio.to_thread(
        protocol.readied, b.run_id, b.item_id, agent, b.rtt_ms, held=b.barrier_wait
    )
    step = step_of_item(b.run_id, b.item_id)
    if step is None:
        return _barrier(decision)
    if decision.set_at_ms is not None:
        # This report may have set the instant: the calls held here hear it now, not at the
        # watch's next read (core.runs.barrier_watch).
        _watch(svc).poke(b.run_id, step)
    if decision.status == "wait" and b.wait_ms:
        # Held as the agent's first barrier call (one call and two reads fewer per client
        # in a step's start-up storm, issue 29.3), answered as one when the step moves.
        moved, seen = await _watch(svc).wait(b.run_id, step, b.wait_ms / 1000)
        if moved:
            decision = await asyncio.to_thread(protocol.decide, doc, agent, seen)
    return _barrier(decision)


# Each event loop's (an API process's) watch of the steps it holds barrier calls for.
_WATCHES: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, weakref.WeakKeyDictionary[RunService, StepWatch]
] = weakref.WeakKeyDictionary()


def _watch(svc: RunService) -> StepWatch:
    per_service = _WATCHES.setdefault(asyncio.get_running_loop(), weakref.WeakKeyDictionary())
    watch = per_service.get(svc)
    if watch is None:
        read = svc.store.items.get_step
        watch = per_service[svc] = StepWatch(read, WATCH_MS / 1000, svc.lifecycle.now_ms)
    return watch


@router.post("/api/agent/barrier", **doc(BarrierReply, body=True, errors=AGENT))
async def barrier(b: BarrierBody, svc: Svc, caller: CallerOf) -> BarrierReply:
    """A poll of the start barrier; with ``wait_ms``, held while the answer is wait
    (core.runs.barrier_watch): answered as a poll again when the step moves."""
    agent = agent_ref(caller, b.agent_id)
    protocol = svc.protocol
    decision, doc = await asyncio.to_thread(protocol.polled, b.run_id, b.item_id, agent)
    step = step_of_item(b.run_id, b.item_id)
    if decision.status != "wait" or not b.wait_ms or step is None:
        return _barrier(decision)
    # Held while the step waits; then answered again on the step as the watch read it.
    moved, seen = await _watch(svc).wait(b.run_id, step, b.wait_ms / 1000)
    if moved:
        decision = await asyncio.to_thread(protocol.decide, doc, agent, seen)
    return _barrier(decision)


@router.post("/api/agent/heartbeat", **doc(HeartbeatReply, body=True, errors=AGENT))
async def heartbeat(b: HeartbeatBody, svc: Svc, caller: CallerOf) -> HeartbeatReply:
    agent = agent_ref(caller, b.agent_id)
    told = await asyncio.to_thread(
        svc.heartbeat, b.run_id, b.item_id, agent, b.live, waiting=b.waiting
    )
    return HeartbeatReply(cancel=told["cancel"])


@router.post("/api/agent/failure", **doc(FailureReply, body=True, errors=AGENT))
async def failure(b: FailureBody, svc: Svc, caller: CallerOf) -> FailureReply:
    agent = agent_ref(caller, b.agent_id)
    final = await asyncio.to_thread(
        svc.report_failure,
        b.run_id,
        b.item_id,
        agent,
        b.message,
        report_id=b.report_id,
        permanent=b.permanent,
    )
    return FailureReply(status="recorded", final=final)


@router.post("/api/agent/cancelled", **doc(CancelledReply, body=True, errors=AGENT))
async def cancelled(b: ItemRef, svc: Svc, caller: CallerOf) -> CancelledReply:
    agent = agent_ref(caller, b.agent_id)
    await asyncio.to_thread(svc.report_cancelled, b.run_id, b.item_id, agent)
    return CancelledReply(status="recorded")


@router.put(
    "/api/agent/artifacts/{item_id}/{name}",
    **doc(ArtifactStored, status=201, binary="application/gzip", errors=(*AGENT, 413)),
)
async def put_artifact(
    item_id: ItemId,
    name: ArtifactName,
    request: Request,
    svc: Svc,
    caller: CallerOf,
    agent_id: Annotated[str, Query(min_length=1, max_length=128)],
) -> ArtifactStored:
    """A large output of an item (gzip): its timeline, the engine's output, its logs;
    from the agent holding the item (``agent_id``), 409 otherwise."""
    run_id = item_id.rsplit(".", 2)[0]
    data = await request.body()
    agent = agent_ref(caller, agent_id)
    up = await asyncio.to_thread(svc.put_artifact, run_id, item_id, name, data, agent)
    return ArtifactStored(stored=True, bytes=up.bytes, receipt=up.receipt)


@results.put(
    "/api/agent/results/{item_id}",
    **doc(
        StoredReply,
        status=201,
        also={200: StoredReply},
        body=True,
        errors=(*AGENT, 413),
    ),
)
async def put_result(
    item_id: ItemId,
    body: ResultAsSent,
    svc: Svc,
    caller: CallerOf,
    response: Response,
    receipts: ReceiptsHeader = None,
) -> StoredReply:
    """201 when stored, 200 when this item's result was stored before."""
    if not isinstance(body, dict) or body.get("item_id") != item_id:
        raise ValidationFailed([FieldError("item_id", "must match the URL")])
    claimed = body.get("agent_id")
    if not isinstance(claimed, str) or not claimed:
        raise ValidationFailed([FieldError("agent_id", "required")])
    agent = agent_ref(caller, claimed)
    created = await asyncio.to_thread(svc.store_result, body, agent, parse_receipts(receipts))
    response.status_code = 201 if created else 200
    return StoredReply(stored=True, duplicate=not created)
