"""The Teams message that carries one Adaptive Card: what an outgoing webhook may answer
and what an incoming webhook takes (Adaptive Card schema 1.4, the version Teams renders)."""

from __future__ import annotations

from typing import Any

CARD_SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"


def card_message(
    body: list[dict[str, Any]], actions: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    card: dict[str, Any] = {
        "$schema": CARD_SCHEMA,
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": body,
    }
    if actions is not None:
        card["actions"] = actions
    return {
        "type": "message",
        "attachments": [
            {"contentType": "application/vnd.microsoft.card.adaptive", "content": card}
        ],
    }


def open_url(title: str, url: str) -> dict[str, Any]:
    return {"type": "Action.OpenUrl", "title": title, "url": url}


def facts(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    return {"type": "FactSet", "facts": [{"title": k, "value": v} for k, v in pairs]}
