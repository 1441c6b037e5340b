"""The Teams message that carries one Adaptive Card: what an outgoing webhook may answer
and what a Teams Workflows webhook takes (Adaptive Card schema 1.4, which Teams renders).

Office 365 connectors (the incoming webhooks at <tenant>.webhook.office.com/webhookb2/...)
were retired; channels now receive cards through a Workflows webhook ("Post to a channel
when a webhook request is received"), whose flow reads this envelope: a ``message`` with
``attachments``, each an Adaptive Card with ``contentType``, ``contentUrl`` (null) and
``content`` (msteams-docs, "Create incoming webhooks with Workflows for Microsoft Teams")."""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from core.models.cards import (
    Action,
    AdaptiveCard,
    Element,
    FactSet,
    MessageAttachment,
    OpenUrlAction,
    TeamsMessage,
)


def card_message(body: list[Element], actions: list[Action] | None = None) -> TeamsMessage:
    card = AdaptiveCard(body=body, actions=actions)
    return TeamsMessage(attachments=[MessageAttachment(content=card)])


def open_url(title: str, url: str) -> OpenUrlAction:
    return OpenUrlAction(title=title, url=url)


def facts(pairs: list[tuple[str, str]]) -> FactSet:
    return FactSet.of(pairs)


TeamsUrlKind = Literal["workflows", "connector", "other"]


def teams_url_kind(url: str) -> TeamsUrlKind:
    """What a Teams webhook URL is, from its shape: a Workflows trigger (Logic Apps'
    ``/workflows/<id>/triggers/manual/paths/invoke``, or Power Automate's
    ``.../powerautomate/automations/direct/workflows/<id>/triggers/manual/paths/invoke``), a
    retired Office 365 connector (``/webhookb2/`` on webhook.office.com, or the older
    outlook.office.com ``/webhook/``), or neither (a relay of one's own: sent as it is)."""
    parts = urlsplit(url)
    host, path = (parts.hostname or "").lower(), parts.path
    if "/workflows/" in path and path.endswith("/triggers/manual/paths/invoke"):
        return "workflows"
    if "/webhookb2/" in path or (host.endswith("office.com") and path.startswith("/webhook/")):
        return "connector"
    return "other"
