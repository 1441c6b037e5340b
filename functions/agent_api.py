"""The agents' protocol: claim, ready, barrier, heartbeat, failure, cancelled, artifacts and
results. Agents hold no database rights; the API writes for them.

Each report is accepted only from the agent holding the item, in a state where it may send
it: anything else is 409 and changes nothing (core.runs.holder).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from core.errors import FieldError, ValidationFailed
from core.models import ITEM_ID_PATTERN, MAX_RTT_MS, RUN_ID_PATTERN, ArtifactName, WorkItem
from core.models import Result as WorkResult
from core.models.holder import AgentRef
from core.models.live import LiveSample
from core.runs.live import MAX_SAMPLES_PER_BEAT
from core.runs.protocol import BarrierDecision
from core.validation import parse
from functions import apidocs as d
from functions.auth import agent_ref
from functions.openapi import doc
from functions.params import MAX_DOCUMENT_BYTES, ItemId, caller_of, json_body, svc

router = APIRouter()
AGENT = (400, 404, 409, 503)  # 409: a report from an agent not holding the item


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
        description="the agent's slowest recent round trip to the API, ms: the start "
        "barrier's lead is derived from the step's agents' round trips",
    )


class HeartbeatBody(ItemRef):
    live: list[LiveSample] = Field(
        default_factory=list,
        max_length=MAX_SAMPLES_PER_BEAT,
        description="live: the agent's last minute of fio's status intervals, sent when "
        "one is new, for the live view (GET /api/runs/{run_id}/live); never the run's figures",
    )


class FailureBody(ItemRef):
    message: str = Field(max_length=8000)
    # Keys the report, so that a retried report is recorded once (a uuid per report).
    report_id: str | None = Field(None, min_length=1, max_length=64)
    permanent: bool = Field(
        False, description="no retry can succeed: the item fails at once, not redelivered"
    )


def _agent(request: Request, agent_id: str) -> AgentRef:
    """The reporting agent, as its credential proves it (403 naming agent_id otherwise)."""
    return agent_ref(caller_of(request), agent_id)


@router.post("/api/agent/claim", **doc(d.ClaimReply, body=ClaimBody, errors=AGENT))
async def claim(request: Request) -> dict[str, str]:
    b: ClaimBody = parse(ClaimBody, await json_body(request))
    decision = await asyncio.to_thread(
        svc().claim,
        b.work_item,
        agent=_agent(request, b.agent_id),
        dequeue_count=b.dequeue_count,
        message_id=b.message_id,
    )
    return {"action": decision.action, "reason": decision.reason}


def _barrier(x: BarrierDecision) -> dict[str, Any]:
    return {"status": x.status, "start_at_ms": x.start_at_ms, "reason": x.reason}


@router.post("/api/agent/ready", **doc(d.BarrierReply, body=ReadyBody, errors=AGENT))
async def ready(request: Request) -> dict[str, Any]:
    b: ReadyBody = parse(ReadyBody, await json_body(request))
    agent = _agent(request, b.agent_id)
    decision = await asyncio.to_thread(svc().ready, b.run_id, b.item_id, agent, b.rtt_ms)
    return _barrier(decision)


@router.post("/api/agent/barrier", **doc(d.BarrierReply, body=ItemRef, errors=AGENT))
async def barrier(request: Request) -> dict[str, Any]:
    b: ItemRef = parse(ItemRef, await json_body(request))
    agent = _agent(request, b.agent_id)
    return _barrier(await asyncio.to_thread(svc().barrier, b.run_id, b.item_id, agent))


@router.post("/api/agent/heartbeat", **doc(d.HeartbeatReply, body=HeartbeatBody, errors=AGENT))
async def heartbeat(request: Request) -> dict[str, bool]:
    b: HeartbeatBody = parse(HeartbeatBody, await json_body(request))
    agent = _agent(request, b.agent_id)
    return await asyncio.to_thread(svc().heartbeat, b.run_id, b.item_id, agent, b.live)


@router.post("/api/agent/failure", **doc(d.FailureReply, body=FailureBody, errors=AGENT))
async def failure(request: Request) -> dict[str, Any]:
    b: FailureBody = parse(FailureBody, await json_body(request))
    agent = _agent(request, b.agent_id)
    final = await asyncio.to_thread(
        svc().report_failure,
        b.run_id,
        b.item_id,
        agent,
        b.message,
        report_id=b.report_id,
        permanent=b.permanent,
    )
    return {"status": "recorded", "final": final}


@router.post("/api/agent/cancelled", **doc(d.CancelledReply, body=ItemRef, errors=AGENT))
async def cancelled(request: Request) -> dict[str, str]:
    b: ItemRef = parse(ItemRef, await json_body(request))
    agent = _agent(request, b.agent_id)
    await asyncio.to_thread(svc().report_cancelled, b.run_id, b.item_id, agent)
    return {"status": "recorded"}


@router.put(
    "/api/agent/artifacts/{item_id}/{name}",
    **doc(d.ArtifactStored, status=201, binary="application/gzip", errors=(*AGENT, 413)),
)
async def put_artifact(
    item_id: ItemId,
    name: ArtifactName,
    request: Request,
    agent_id: Annotated[str, Query(min_length=1, max_length=128)],
) -> JSONResponse:
    """A large output of an item (gzip): its timeline, the engine's output, its logs;
    from the agent holding the item (``agent_id``), 409 otherwise."""
    run_id = item_id.rsplit(".", 2)[0]
    data = await request.body()
    agent = _agent(request, agent_id)
    size = await asyncio.to_thread(svc().put_artifact, run_id, item_id, name, data, agent)
    return JSONResponse({"stored": True, "bytes": size}, status_code=201)


@router.put(
    "/api/agent/results/{item_id}",
    **doc(
        d.StoredReply,
        status=201,
        also={200: d.StoredReply},
        body=WorkResult,
        errors=(*AGENT, 413),
    ),
)
async def put_result(item_id: ItemId, request: Request) -> JSONResponse:
    """201 when stored, 200 when this item's result was stored before."""
    body = await json_body(request, MAX_DOCUMENT_BYTES)  # stored as one Cosmos document
    if not isinstance(body, dict) or body.get("item_id") != item_id:
        raise ValidationFailed([FieldError("item_id", "must match the URL")])
    claimed = body.get("agent_id")
    if not isinstance(claimed, str) or not claimed:
        raise ValidationFailed([FieldError("agent_id", "required")])
    agent = _agent(request, claimed)
    created = await asyncio.to_thread(svc().store_result, body, agent)
    return JSONResponse(
        {"stored": True, "duplicate": not created}, status_code=201 if created else 200
    )
