"""Adaptive Cards (schema 1.4, what Teams renders) and the Teams message that carries one:
the elements and actions this service draws, each a model whose JSON is the card's own
(camelCase names by alias; an absent optional field is left out, never sent as null).

``model_dump(mode="json")`` is the JSON text's shape (serialized by alias), taken only where
it leaves the service (an HTTP body, the Agents SDK's attachment): the Adaptive Card schema,
http://adaptivecards.io/schemas/adaptive-card.json."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CARD_SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
CARD_VERSION = "1.4"  # the first version with Action.Execute, and what Teams renders
CardType = Literal["application/vnd.microsoft.card.adaptive"]
CARD_TYPE: CardType = "application/vnd.microsoft.card.adaptive"


def _absent(value: object) -> bool:
    return value is None


def optional(alias: str | None = None) -> Any:
    """An optional property: left out of the JSON when unset (cards have no nulls)."""
    return Field(None, alias=alias, exclude_if=_absent)


class CardModel(BaseModel):
    model_config = ConfigDict(
        extra="forbid", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )


class TextBlock(CardModel):
    type: Literal["TextBlock"] = "TextBlock"
    text: str
    weight: str | None = optional()
    size: str | None = optional()
    color: str | None = optional()
    wrap: bool = True
    is_subtle: bool | None = optional("isSubtle")


class Fact(CardModel):
    title: str
    value: str


class FactSet(CardModel):
    type: Literal["FactSet"] = "FactSet"
    facts: list[Fact]

    @classmethod
    def of(cls, pairs: list[tuple[str, str]]) -> FactSet:
        return cls(facts=[Fact(title=k, value=v) for k, v in pairs])


class Choice(CardModel):
    title: str
    value: str


class ChoiceSetInput(CardModel):
    type: Literal["Input.ChoiceSet"] = "Input.ChoiceSet"
    id: str
    label: str
    is_required: bool | None = optional("isRequired")
    error_message: str | None = optional("errorMessage")
    placeholder: str | None = optional()
    choices: list[Choice]


class NumberInput(CardModel):
    type: Literal["Input.Number"] = "Input.Number"
    id: str
    label: str
    min: int | None = optional()
    max: int | None = optional()
    value: int | None = optional()


Element = Annotated[TextBlock | FactSet | ChoiceSetInput | NumberInput, Field(discriminator="type")]


class ExecuteAction(CardModel):
    """Action.Execute (Universal Actions): Teams invokes the bot with its verb and data."""

    type: Literal["Action.Execute"] = "Action.Execute"
    title: str
    verb: str
    data: dict[str, str] = Field(default_factory=dict)


class OpenUrlAction(CardModel):
    type: Literal["Action.OpenUrl"] = "Action.OpenUrl"
    title: str
    url: str


Action = Annotated[ExecuteAction | OpenUrlAction, Field(discriminator="type")]


class Refresh(CardModel):
    """What Teams invokes when someone looks at the card: the card then updates itself."""

    action: ExecuteAction


class AdaptiveCard(CardModel):
    schema_: str = Field(CARD_SCHEMA, alias="$schema")
    type: Literal["AdaptiveCard"] = "AdaptiveCard"
    version: str = CARD_VERSION
    body: list[Element]
    actions: list[Action] | None = optional()
    refresh: Refresh | None = optional()


class CardAttachment(CardModel):
    """An activity's attachment holding one card (what the bot sends)."""

    content_type: CardType = Field(CARD_TYPE, alias="contentType")
    content: AdaptiveCard


class MessageAttachment(CardModel):
    """A Teams message's attachment: the Workflows flow reads ``contentUrl`` (null) too."""

    content_type: CardType = Field(CARD_TYPE, alias="contentType")
    content_url: None = Field(None, alias="contentUrl")
    content: AdaptiveCard


class TeamsMessage(CardModel):
    """A ``message`` with one Adaptive Card: what an outgoing webhook may answer and what a
    Teams Workflows webhook takes."""

    type: Literal["message"] = "message"
    attachments: list[MessageAttachment]
