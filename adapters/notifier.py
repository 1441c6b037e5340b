"""Sends a new regression to the configured Teams incoming webhook and/or signed generic
webhook. A failed webhook is recorded, never raised: it must not fail the timer."""

from __future__ import annotations

import logging
from typing import Any

from adapters.config import Settings
from adapters.webhook import Delivery, WebhookSender
from core.models.regression import DeliveryRecord, Regression

log = logging.getLogger(__name__)


class WebhookNotifier:
    def __init__(
        self,
        *,
        teams_url: str | None,
        webhook_url: str | None,
        webhook_secret: bytes | None,
        public_url: str,
        sender: WebhookSender | None = None,
    ) -> None:
        self.teams_url = teams_url
        self.webhook_url = webhook_url
        self.webhook_secret = webhook_secret
        self.public_url = public_url
        self.sender = sender or WebhookSender()

    @classmethod
    def from_settings(cls, s: Settings) -> WebhookNotifier:
        return cls(
            teams_url=s.teams_webhook_url,
            webhook_url=s.webhook_url,
            webhook_secret=s.webhook_secret.encode() if s.webhook_secret else None,
            public_url=s.public_url,
        )

    def notify(self, regression: Regression) -> list[DeliveryRecord]:
        doc = regression.doc()  # the JSON the card is built from and the webhook carries
        sent: list[tuple[str, Delivery]] = []
        if self.teams_url:
            sent.append(
                (
                    "teams",
                    self.sender.send_teams(self.teams_url, doc, base_url=self.public_url),
                )
            )
        if self.webhook_url and self.webhook_secret:
            sent.append(
                (
                    "webhook",
                    self.sender.send_signed(
                        self.webhook_url,
                        doc,
                        base_url=self.public_url,
                        secret=self.webhook_secret,
                    ),
                )
            )
        return _records(sent)

    def post_result(
        self, door: str, teams_message: dict[str, Any], payload: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """A finished run asked for through a chat goes back where it came from."""
        sent: list[tuple[str, Delivery]] = []
        if door == "bot-teams" and self.teams_url:
            sent.append(("teams", self.sender.send_message(self.teams_url, teams_message)))
        if door == "bot-webhook" and self.webhook_url and self.webhook_secret:
            sent.append(
                (
                    "webhook",
                    self.sender.send_signed_payload(
                        self.webhook_url, payload, secret=self.webhook_secret
                    ),
                )
            )
        return [r.model_dump() for r in _records(sent)]


def _records(sent: list[tuple[str, Delivery]]) -> list[DeliveryRecord]:
    # Webhook URLs carry their own secrets (Teams'): keep them out of stored records.
    return [
        DeliveryRecord(
            channel=channel, ok=d.ok, attempts=d.attempts, status=d.status, error=d.error
        )
        for channel, d in sent
    ]
