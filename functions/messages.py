"""The Teams bot's door: ``POST /api/messages`` (Microsoft 365 Agents SDK, functions/teams_bot.py).

Personal chats, group chats and channels all arrive here as Bot Framework activities. Each
request is checked before the SDK sees it: the channel's bearer token (adapters/bot_auth.py:
the SDK's validator, explicit issuers), the activity's service URL against the token's
``serviceurl`` claim (the bot only ever answers to where the signed token says), and the
activity id against those already handled (a replayed activity gets 409 and does nothing).
The SDK is imported on the first activity (or at start-up, in the background), not with
the app: it takes seconds to import.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Body, Request, Response, Security
from fastapi.responses import JSONResponse

from core.models.activity import SeenActivity
from core.models.chat import BotAccepted, BotActivity, BotInvokeReply
from functions.openapi import BOT_MESSAGES, BOT_TOKEN, doc
from functions.params import JsonRoute, Parts, documented_as

router = APIRouter(route_class=JsonRoute, tags=["chat doors"])
# Checked here, then handed to the SDK as sent (functions/params.JsonRoute: strict JSON).
ActivityAsSent = Annotated[Any, documented_as(BotActivity), Body()]


def _refuse(status: int, field: str, message: str) -> JSONResponse:
    return JSONResponse({"errors": [{"field": field, "message": message}]}, status_code=status)


def _same_host(a: str, b: str) -> bool:
    try:
        return (
            bool(a) and (urlsplit(a).hostname or "").lower() == (urlsplit(b).hostname or "").lower()
        )
    except ValueError:
        return False


@router.post(
    BOT_MESSAGES,
    dependencies=[Security(BOT_TOKEN)],
    **doc(
        BotAccepted,
        status=202,
        also={200: BotInvokeReply},
        body=True,
        errors=(400, 401, 409, 503),
    ),
)
async def messages(request: Request, sent: ActivityAsSent, parts: Parts) -> Response:
    """Bot Framework activities from Teams (Azure Bot Service), with the channel's token."""
    host = await asyncio.to_thread(parts.teams_host)  # the first call imports the SDK
    if host is None:
        return _refuse(503, "(service)", "the Teams bot is not configured")
    from microsoft_agents.activity import Activity

    from adapters.bot_auth import authorize

    identity = await authorize(
        request.headers.get("authorization"), host.connector.config, host.connector.keys
    )
    if identity is None:
        return _refuse(401, "Authorization", "missing, expired or badly signed token")
    try:
        activity = Activity.model_validate(sent)
    except ValueError:
        return _refuse(400, "(body)", "not a Bot Framework activity")
    if not activity.id or not activity.conversation or not activity.conversation.id:
        return _refuse(400, "id", "an activity needs its id and conversation.id")
    # The SDK only logs a mismatch unless its host allow-list is on; the bot refuses it.
    if not _same_host(
        str(identity.get_claim_value("serviceurl") or ""), activity.service_url or ""
    ):
        return _refuse(401, "serviceUrl", "the activity's service URL is not the token's")
    seen = hashlib.sha256(f"{activity.conversation.id}\n{activity.id}".encode()).hexdigest()[:32]
    first = SeenActivity(id=f"m365:{seen}", seen_at_ms=int(time.time() * 1000))
    if not await asyncio.to_thread(parts.store.activities.create, first):
        return _refuse(409, "id", "activity already handled (replay)")
    request.state.claims_identity = identity
    response = await host.connector.adapter.process(request, host.app)
    if response is None or response.status_code == 202:
        return JSONResponse({"accepted": True}, status_code=202)
    if response.status_code == 501:  # the SDK: an invoke the bot has no route for
        name = activity.name or activity.type
        return _refuse(400, "name", f"the bot does not handle {name!r} invokes")
    return response
