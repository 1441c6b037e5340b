"""OpenAPI models of the chat doors (functions/bot.py, functions/messages.py): what Teams
and a signed webhook post, and what the doors answer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from functions.apidocs import OpenDoc


class TeamsActivity(OpenDoc):
    """The activity Teams posts to an outgoing webhook (only these fields are read)."""

    id: str
    text: str | None = None
    timestamp: str = Field(description="ISO 8601 with offset; within 5 minutes of now")
    from_: dict[str, Any] | None = Field(None, alias="from", description="name, aadObjectId")


class TeamsMessage(OpenDoc):
    type: Literal["message"]
    attachments: list[dict[str, Any]] = Field(description="one Adaptive Card")


class BotActivity(OpenDoc):
    """A Bot Framework activity (the Teams bot, /api/messages); only these fields are read
    before the Microsoft 365 Agents SDK takes it."""

    type: str = Field(description="message, invoke (a card's Action.Execute), conversationUpdate")
    id: str = Field(description="unique in its conversation: a second post of it is a replay")
    serviceUrl: str = Field(description="where the bot answers: the token's serviceurl host")
    conversation: dict[str, Any] = Field(description="id; isGroup, conversationType, tenantId")
    from_: dict[str, Any] | None = Field(None, alias="from", description="id, name, aadObjectId")
    text: str | None = None
    value: dict[str, Any] | None = Field(None, description="invoke: {action: {verb, data}}")


class BotAccepted(BaseModel):
    accepted: bool = Field(description="a message or event: the bot answers through the channel")


class BotInvokeReply(OpenDoc):
    """An invoke's answer (a card's Action.Execute): the card that replaces the pressed one."""

    statusCode: int
    type: str = Field(description="application/vnd.microsoft.card.adaptive")
    value: dict[str, Any] | None = Field(None, description="the Adaptive Card")


class WebhookCommand(OpenDoc):
    text: str = Field(description="a bot command, e.g. run smoke-randread-4k on scratch")
    user: str | None = None


class WebhookReply(BaseModel):
    command: str
    ok: bool
    title: str
    lines: list[str]
    facts: dict[str, str]
    data: dict[str, Any]
    link: str | None
