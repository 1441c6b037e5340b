"""The Bot Connector through the Microsoft 365 Agents SDK: the FastAPI ``CloudAdapter`` that
answers /api/messages, and proactive posts and card updates to stored conversations.

The bot's identity is the Function App's user-assigned managed identity (the Azure Bot's
app id is its client id): the SDK's MSAL connection gets Bot Framework tokens from the
platform's managed identity endpoint, with no secret anywhere. The adapter only posts to
hosts Microsoft's channels use (the SDK's outbound host validator), except on the local
stack, whose test connector listens on loopback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from microsoft_agents.activity import Activity, Attachment, ResourceResponse
from microsoft_agents.authentication.msal import MsalConnectionManager
from microsoft_agents.hosting.core import OutboundHostValidator, TurnContext
from microsoft_agents.hosting.core.app.proactive import Conversation as SdkConversation
from microsoft_agents.hosting.fastapi import CloudAdapter

from adapters.bot_auth import IssuerKeys, auth_configuration
from core.models.cards import CardAttachment
from core.models.chat import StoredConversation

CONNECT_TIMEOUT_S = 30.0  # one post or update, token included


class BotConnector:
    def __init__(
        self, app_id: str, tenant_id: str, issuers: Mapping[str, str], *, local: bool
    ) -> None:
        self.app_id = app_id
        self.config = auth_configuration(app_id, tenant_id, issuers)
        self.keys = IssuerKeys(issuers)
        self.connections = MsalConnectionManager(
            connections_configurations={"SERVICE_CONNECTION": self.config}
        )
        self.adapter = CloudAdapter(
            connection_manager=self.connections,
            host_validator=OutboundHostValidator(enabled=not local),
        )

    # ---- ConversationSender (core.chat.threads): called from the timer's threads ------

    def send(
        self, conversation: StoredConversation, attachments: list[CardAttachment]
    ) -> str | None:
        """A new message in the stored conversation (in a channel: a reply in the thread
        the request came from); its activity id."""
        activity = _message(attachments)
        response: list[ResourceResponse | None] = [None]

        async def post(context: TurnContext) -> None:
            response[0] = await context.send_activity(activity)

        _run(self._continue(conversation, post))
        return response[0].id if response[0] is not None else None

    def update(
        self,
        conversation: StoredConversation,
        activity_id: str,
        attachments: list[CardAttachment],
    ) -> None:
        """Replace a message the bot sent (a run's card) in place."""
        activity = _message(attachments)
        activity.id = activity_id

        async def put(context: TurnContext) -> None:
            await context.update_activity(activity)

        _run(self._continue(conversation, put))

    async def _continue(
        self,
        conversation: StoredConversation,
        callback: Callable[[TurnContext], Awaitable[None]],
    ) -> None:
        stored = SdkConversation.from_json_to_store_item(conversation.model_dump(mode="json"))
        stored.validate()
        claims = SdkConversation.identity_from_claims(stored.claims)
        reference = stored.conversation_reference
        continuation = reference.get_continuation_activity()
        if reference.activity_id:
            # What the bot sends replies to the request itself (in a channel, in its thread),
            # not to the made-up id of the SDK's continuation event.
            continuation.id = reference.activity_id
        await asyncio.wait_for(
            self.adapter.continue_conversation_with_claims(claims, continuation, callback),
            CONNECT_TIMEOUT_S,
        )


def sdk_attachment(a: CardAttachment) -> Attachment:
    """A card as the SDK's attachment: the card's JSON, made here at the edge."""
    return Attachment(content_type=a.content_type, content=a.content.model_dump(mode="json"))


def _message(attachments: list[CardAttachment]) -> Activity:
    return Activity(type="message", attachments=[sdk_attachment(a) for a in attachments])


def _run(coroutine: Coroutine[Any, Any, None]) -> None:
    """The timer calls from a worker thread, which has no event loop of its own."""
    asyncio.run(coroutine)


def stored_conversation(context: TurnContext) -> StoredConversation:
    """The conversation of this turn as the SDK stores it: its reference and the claims a
    proactive turn continues under."""
    stored = SdkConversation.from_turn_context(context).store_item_to_json()
    return StoredConversation.model_validate(stored)
