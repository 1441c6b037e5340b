"""The chat doors: a Teams outgoing webhook and a generic signed webhook.

Both authenticate every request by HMAC themselves (App Service Authentication excludes
these routes), refuse stale and repeated requests, and answer at once: a run is only
enqueued here; its result card is posted later, when the run is finalized.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request, Security
from fastapi.responses import JSONResponse

from core.chat.bot import parse_command
from core.chat.cards import adaptive_card, json_reply
from core.errors import ValidationFailed
from core.models.activity import SeenActivity
from core.models.cards import TeamsMessage
from core.models.chat import ChatReply, TeamsActivity, WebhookCommand
from core.monitoring.notify import SIGNATURE_HEADER, verify, verify_teams
from core.runs.guardrails import Caller
from functions.inputs import parse_json
from functions.openapi import TEAMS_HMAC, WEBHOOK_SIGNATURE, WEBHOOK_TIMESTAMP, doc
from functions.params import Parts, SignedRoute, documented_as, read_body

FRESH_S = 300  # Teams activities and signed webhook requests older than this are refused
# A door not configured is not a passing failure (a 503 is retried by pipelines and SDK
# retry policies for ever): it is not there.
NOT_ENABLED = "the {door} chat door is not enabled on this service ({setting} is not set)"
TEAMS_SETTING, WEBHOOK_SETTING = "BENCH_TEAMS_BOT_SECRET", "BENCH_BOT_SECRET"
router = APIRouter(route_class=SignedRoute, tags=["chat doors"])
# Documented by their models; parsed (strict JSON) once the signature is checked.
TeamsAsSent = Annotated[Any, documented_as(TeamsActivity), Body()]
CommandAsSent = Annotated[Any, documented_as(WebhookCommand), Body()]


def _refuse(status: int, field: str, message: str) -> JSONResponse:
    return JSONResponse({"errors": [{"field": field, "message": message}]}, status_code=status)


def _age_s(timestamp: Any) -> float | None:
    try:
        ts = datetime.fromisoformat(str(timestamp).replace("Z", "+00:00"))
    except ValueError:
        return None
    if ts.tzinfo is None:
        return None
    return abs(time.time() - ts.timestamp())


async def _first_time(parts: Parts, activity_id: str) -> bool:
    seen = SeenActivity(id=activity_id, seen_at_ms=int(time.time() * 1000))
    return await asyncio.to_thread(parts.store.activities.create, seen)


@router.post(
    "/api/bot/teams",
    dependencies=[Security(TEAMS_HMAC)],
    **doc(TeamsMessage, body=True, errors=(400, 401, 404, 409, 503)),
)
async def teams(
    request: Request,
    sent: TeamsAsSent,  # for the document: read below, after the signature
    parts: Parts,
) -> JSONResponse:
    """Teams outgoing webhook: ``Authorization: HMAC <base64>`` over the raw body. 404 when
    this door is not enabled (no secret configured): nothing to retry."""
    secret = parts.settings.teams_bot_secret
    if not secret:
        return _refuse(404, "(path)", NOT_ENABLED.format(door="Teams", setting=TEAMS_SETTING))
    raw = await read_body(request)
    if not verify_teams(raw, request.headers.get("authorization"), secret):
        return _refuse(401, "Authorization", "bad or missing HMAC signature")
    try:
        activity = parse_json(raw)  # refuses what JSON or the reply could not carry
        activity_id = str(activity["id"])
        text = str(activity.get("text") or "")
        sender = activity.get("from")
    except (ValidationFailed, KeyError, TypeError, AttributeError):
        return _refuse(400, "(body)", "not a Teams activity")
    if not isinstance(sender, dict):
        sender = {}
    age = _age_s(activity.get("timestamp"))
    if age is None or age > FRESH_S:
        return _refuse(401, "timestamp", f"stale or missing activity timestamp (> {FRESH_S} s)")
    # A Cosmos DB id may not hold / \ ? # nor exceed 255 characters; Teams' ids are opaque.
    seen_id = hashlib.sha256(activity_id.encode()).hexdigest()[:32]
    if not await _first_time(parts, f"teams:{seen_id}"):
        return _refuse(409, "id", "activity already handled (replay)")
    who = str(sender.get("name") or sender.get("aadObjectId") or "unknown")
    caller = Caller(name=f"teams:{who}", role=parts.settings.bot_role, door="bot-teams")
    reply = await asyncio.to_thread(parts.bot.answer, parse_command(text), caller, activity_id)
    return JSONResponse(adaptive_card(reply).model_dump(mode="json"))


@router.post(
    "/api/bot/webhook",
    dependencies=[Security(WEBHOOK_SIGNATURE), Security(WEBHOOK_TIMESTAMP)],
    **doc(ChatReply, body=True, errors=(400, 401, 404, 409, 503)),
)
async def webhook(
    request: Request,
    sent: CommandAsSent,  # for the document: read below, after the signature
    parts: Parts,
) -> JSONResponse:
    """Generic chat/script door: body ``{"text": "...", "user": "..."}`` signed with
    X-Bench-Timestamp / X-Bench-Signature (HMAC-SHA256 over ``<timestamp>.<body>``)."""
    secret = parts.settings.bot_secret
    if not secret:
        return _refuse(404, "(path)", NOT_ENABLED.format(door="webhook", setting=WEBHOOK_SETTING))
    raw = await read_body(request)
    headers = dict(request.headers)
    if not verify(raw, headers, secret=secret.encode(), now=int(time.time()), tolerance_s=FRESH_S):
        return _refuse(401, SIGNATURE_HEADER, "bad, missing or stale signature")
    try:
        body = parse_json(raw)
        text = str(body["text"])
        user = str(body.get("user") or "unknown")[:100]
    except (ValidationFailed, KeyError, TypeError, AttributeError):
        return _refuse(400, "text", 'expected {"text": "<command>", "user": "<name>"}')
    # The signature is unique per body and timestamp: seen once means a replay.
    signature = headers.get(SIGNATURE_HEADER.lower(), "")
    request_id = hashlib.sha256(signature.encode()).hexdigest()[:32]
    if not await _first_time(parts, f"webhook:{request_id}"):
        return _refuse(409, SIGNATURE_HEADER, "request already handled (replay)")
    caller = Caller(name=f"webhook:{user}", role=parts.settings.bot_role, door="bot-webhook")
    reply = await asyncio.to_thread(parts.bot.answer, parse_command(text), caller, request_id)
    return JSONResponse(json_reply(reply).model_dump(mode="json"))
