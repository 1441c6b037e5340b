"""The Teams bot on the Microsoft 365 Agents SDK: its ``AgentApplication``, with the Teams
extension's routes for messages and the bot's arrival in a chat, and an ``Action.Execute``
route per card verb. Each hands over to core/chat/teams_bot.py and sends back its card; a
run started here has its conversation stored, for its card's updates and its result.
(functions/messages.py checks each request before it gets here.)
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from microsoft_agents.activity import (
    AdaptiveCardInvokeResponse,
    Attachment,
    ConversationUpdateTypes,
)
from microsoft_agents.hosting.core import (
    AgentApplication,
    MemoryStorage,
    MessageFactory,
    TurnContext,
    TurnState,
)
from microsoft_agents.hosting.core.app.adaptive_card import factory
from microsoft_agents.hosting.msteams import TeamsAgentExtension, TeamsTurnContext

from adapters.bot_connector import BotConnector, sdk_attachment, stored_conversation
from core.chat.action_cards import VERBS, attachment
from core.chat.identity import ChatUser
from core.chat.teams_bot import Outcome, TeamsBot
from core.chat.threads import Threads
from core.errors import StoreUnavailable
from core.models.chat import ActionData, StoredConversation

log = logging.getLogger(__name__)
_ANY_TEXT = re.compile(r"[\s\S]*")


@dataclass
class TeamsHost:
    connector: BotConnector
    app: AgentApplication[TurnState]
    bot: TeamsBot
    threads: Threads


def build_app(
    connector: BotConnector, bot: TeamsBot, threads: Threads
) -> AgentApplication[TurnState]:
    app = AgentApplication[TurnState](
        storage=MemoryStorage(),
        connection_manager=connector.connections,
        start_typing_timer=False,
        remove_recipient_mention=True,
    )
    teams = TeamsAgentExtension[TurnState](app)

    @teams.message(_ANY_TEXT)
    async def on_message(ctx: TeamsTurnContext, state: TurnState) -> None:
        conversation = stored_conversation(ctx)
        outcome = await asyncio.to_thread(
            bot.on_text, _user(ctx), ctx.activity.text or "", str(ctx.activity.id), conversation
        )
        sent = await ctx.send_activity(MessageFactory.attachment(_attachment(outcome)))
        await _remember(threads, outcome, conversation, sent.id if sent else None)

    @teams.conversation_update(ConversationUpdateTypes.MEMBERS_ADDED)
    async def on_added(ctx: TeamsTurnContext, state: TurnState) -> None:
        recipient = ctx.activity.recipient.id if ctx.activity.recipient else None
        if any(m.id == recipient for m in ctx.activity.members_added or []):
            outcome = await asyncio.to_thread(
                bot.on_text, _user(ctx), "help", str(ctx.activity.id), stored_conversation(ctx)
            )
            await ctx.send_activity(MessageFactory.attachment(_attachment(outcome)))

    for verb in VERBS:
        app.adaptive_card.action_execute(verb)(_action(bot, threads, verb))

    connector.adapter.on_turn_error = _on_turn_error
    return app


def _action(
    bot: TeamsBot, threads: Threads, verb: str
) -> Callable[[TurnContext, TurnState, Any], Awaitable[AdaptiveCardInvokeResponse]]:
    async def on_action(
        ctx: TurnContext, state: TurnState, data: Any
    ) -> AdaptiveCardInvokeResponse:
        conversation = stored_conversation(ctx)
        card_id = ctx.activity.reply_to_id  # the message whose card was pressed
        if card_id:
            conversation.conversation_reference.activity_id = card_id
        outcome = await asyncio.to_thread(
            bot.on_action,
            _user(ctx),
            verb,
            ActionData.read(data),
            str(ctx.activity.id),
            conversation,
        )
        await _remember(threads, outcome, conversation, card_id)
        return factory.adaptive_card(outcome.card.model_dump(mode="json"))  # type: ignore[arg-type]

    return on_action


async def _remember(
    threads: Threads, outcome: Outcome, conversation: StoredConversation, card_id: str | None
) -> None:
    if outcome.started is not None:
        await asyncio.to_thread(threads.remember_run, outcome.started, conversation, card_id)


def _attachment(outcome: Outcome) -> Attachment:
    return sdk_attachment(attachment(outcome.card))


def _user(ctx: TurnContext) -> ChatUser:
    sender = ctx.activity.from_property
    tenant = ctx.activity.conversation.tenant_id if ctx.activity.conversation else None
    return ChatUser(
        object_id=str(sender.aad_object_id or "") if sender else "",
        name=str(sender.name or "") if sender else "",
        tenant_id=str(tenant or ""),
    )


async def _on_turn_error(ctx: TurnContext, error: Exception) -> None:
    """A failure is told to the user plainly; its details go to the log only."""
    if isinstance(error, StoreUnavailable):
        text = f"I cannot reach {error.service} right now; please try again in a minute."
    else:
        log.exception("Teams bot turn failed", exc_info=error)
        text = "Something went wrong on my side; the service's log has the details."
    await ctx.send_activity(MessageFactory.text(text))
