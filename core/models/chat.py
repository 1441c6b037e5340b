"""The chat doors' shapes (pure): a Teams conversation as the Agents SDK stores it, what a
card's Action.Execute carries, and the JSON the generic webhook answers and is told.

Bot Framework's objects carry more than the service reads; those models keep the rest
(``extra="allow"``), so what the SDK stored is what it reads back."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from core.models.answers import OpenDoc
from core.models.cards import AdaptiveCard


class _BotFramework(BaseModel):
    model_config = ConfigDict(
        extra="allow", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )


class ConversationAccount(_BotFramework):
    """Bot Framework's ``conversation``: its id (tenantId, conversationType... kept)."""

    id: str


class ConversationReference(_BotFramework):
    """Where the bot posts back (Bot Framework's ConversationReference, camelCase): the
    conversation, the channel's service URL and the activity replies go to."""

    conversation: ConversationAccount | None = None
    service_url: str | None = Field(None, alias="serviceUrl")
    activity_id: str | None = Field(None, alias="activityId")


class StoredConversation(_BotFramework):
    """The SDK's proactive ``Conversation`` as it stores it: the reference and the claims a
    proactive turn continues under (aud, azp, appid, idtyp, ver, iss, tid)."""

    claims: dict[str, str] = Field(default_factory=dict)
    conversation_reference: ConversationReference = Field(default_factory=ConversationReference)

    @property
    def id(self) -> str:
        ref = self.conversation_reference.conversation
        return ref.id if ref is not None else ""


class ActionData(BaseModel):
    """What a card's button sends with its verb (Action.Execute ``data``, with the form's
    inputs merged in by Teams): each verb reads its own fields."""

    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)

    run_id: str = ""
    series: str = ""
    profile: str = ""
    target: str = ""
    clients: str | None = None  # Input.Number's value: a number, or text, or empty
    runtime: str | None = None

    @classmethod
    def read(cls, data: object) -> ActionData:
        """The invoke's data as sent; anything else reads as empty (the verb then says
        what is missing, as for a form sent blank)."""
        try:
            return cls.model_validate(data if isinstance(data, dict) else {})
        except ValidationError:
            return cls()


class ChatReply(BaseModel):
    """The generic webhook's answer: the reply as JSON (``data`` is the command's own)."""

    command: str
    ok: bool
    title: str
    lines: list[str]
    facts: dict[str, str]
    data: dict[str, JsonValue]
    link: str | None


class RunFinished(ChatReply):
    """What the signed generic webhook is told when a run asked for there finishes."""

    event: str = "run.finished"


class ChannelAccount(_BotFramework):
    """Bot Framework's ``from``: who sent the activity (role, userPrincipalName... kept)."""

    id: str | None = None
    name: str | None = None
    aad_object_id: str | None = Field(None, alias="aadObjectId")


class InvokeAction(_BotFramework):
    """An ``adaptiveCard/action`` invoke's action: the pressed Action.Execute."""

    type: str = "Action.Execute"
    verb: str
    data: dict[str, JsonValue] = Field(default_factory=dict)


class InvokeValue(_BotFramework):
    action: InvokeAction


# ---- what the doors are sent and answer (functions/bot.py, functions/messages.py) ----------


class TeamsActivity(OpenDoc):
    """The activity Teams posts to an outgoing webhook (only these fields are read)."""

    id: str
    text: str | None = None
    timestamp: str = Field(description="ISO 8601 with offset; within 5 minutes of now")
    from_: ChannelAccount | None = Field(None, alias="from", description="name, aadObjectId")


class BotActivity(OpenDoc):
    """A Bot Framework activity (the Teams bot, /api/messages); only these fields are read
    before the Microsoft 365 Agents SDK takes it."""

    type: str = Field(description="message, invoke (a card's Action.Execute), conversationUpdate")
    id: str = Field(description="unique in its conversation: a second post of it is a replay")
    serviceUrl: str = Field(description="where the bot answers: the token's serviceurl host")
    conversation: ConversationAccount = Field(description="id; isGroup, conversationType, tenantId")
    from_: ChannelAccount | None = Field(None, alias="from", description="id, name, aadObjectId")
    text: str | None = None
    value: InvokeValue | None = Field(None, description="invoke: {action: {verb, data}}")


class BotAccepted(BaseModel):
    accepted: bool = Field(description="a message or event: the bot answers through the channel")


class BotInvokeReply(OpenDoc):
    """An invoke's answer (a card's Action.Execute): the card that replaces the pressed one."""

    statusCode: int
    type: str = Field(description="application/vnd.microsoft.card.adaptive")
    value: AdaptiveCard | None = Field(None, description="the Adaptive Card")


class WebhookCommand(OpenDoc):
    text: str = Field(description="a bot command, e.g. run smoke-randread-4k on scratch")
    user: str | None = None
