"""Deliver regression notifications: Teams (Adaptive Card) and HMAC-signed JSON webhooks.

Delivery never raises: the detection timer calls this, and a webhook that is down must not
fail the timer. Connection errors, 429 and 5xx are retried with capped exponential backoff
(Retry-After seconds honoured, under the same cap); other 4xx are final.

Webhook URLs are credentials (a Teams URL carries its secret in the path, a Workflows URL in
its ``sig`` query parameter), so logs show only scheme and host, never the path, query or
signing secret.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel

from core.models.cards import TeamsMessage
from core.monitoring.notify import sign, teams_card, webhook_body
from core.teams import teams_url_kind

log = logging.getLogger(__name__)

USER_AGENT = "benchsvc-webhook/1"
CONNECTOR_RETIRED = (
    "an Office 365 connector URL: connectors were retired; create a Teams Workflows webhook "
    "(docs/deploy.md, step 6) and set it as teams-webhook-url"
)
# Legacy Teams connectors answer throttling with a 2xx whose body carries this text instead of
# a 429 (msteams-docs, connectors-using.md, "Rate limiting for connectors").
_TEAMS_THROTTLED = "HTTP error 429"
# Failures worth another try; e.g. UnsupportedProtocol (a bad URL) is final.
_TRANSIENT = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
    httpx.ProxyError,
)


@dataclass(frozen=True)
class Delivery:
    url: str
    ok: bool
    attempts: int
    status: int | None
    error: str | None


def redact_url(url: str) -> str:
    """Scheme and host only: everything after may be a secret."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<invalid url>"
    return f"{parts.scheme or '?'}://{host}{port}/…"


def _retry_after_s(response: httpx.Response) -> float | None:
    # Only the delta-seconds form; an HTTP-date falls back to our own backoff.
    raw = response.headers.get("Retry-After")
    if raw is None:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return value if value >= 0 else None


class WebhookSender:
    def __init__(
        self,
        *,
        client: httpx.Client | None = None,
        attempts: int = 4,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        if backoff_s < 0 or max_backoff_s < 0:
            raise ValueError("backoff must not be negative")
        self._owns_client = client is None
        # No redirects: a redirected POST could carry the signed body somewhere unintended.
        self._client = client or httpx.Client(timeout=10.0, follow_redirects=False)
        self._attempts = attempts
        self._backoff_s = backoff_s
        self._max_backoff_s = max_backoff_s
        self._sleep = sleep

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> WebhookSender:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def send_teams(self, url: str, regression: Mapping[str, Any], *, base_url: str) -> Delivery:
        try:
            card = teams_card(regression, base_url=base_url)
        except Exception as e:  # a malformed stored regression must not fail the caller
            return self._give_up(url, 0, None, f"cannot build card: {type(e).__name__}: {e}")
        return self.send_message(url, card)

    def send_message(self, url: str, message: TeamsMessage) -> Delivery:
        """Any ready-made Teams message: a regression card, a bot's result card. A retired
        Office 365 connector URL is not tried: it says how to replace it instead."""
        if teams_url_kind(url) == "connector":
            return self._give_up(url, 0, None, CONNECTOR_RETIRED)
        body = json.dumps(message.model_dump(mode="json")).encode()
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        return self._deliver(url, lambda: (body, headers), teams=True)

    def send_signed_payload(
        self,
        url: str,
        payload: BaseModel,
        *,
        secret: bytes,
        now: Callable[[], float] = time.time,
    ) -> Delivery:
        data = payload.model_dump(mode="json")
        body = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
        return self._send_signed_body(url, body, secret=secret, now=now)

    def send_signed(
        self,
        url: str,
        regression: Mapping[str, Any],
        *,
        base_url: str,
        secret: bytes,
        now: Callable[[], float] = time.time,
    ) -> Delivery:
        try:
            body = webhook_body(regression, base_url=base_url)
        except Exception as e:  # a malformed stored regression must not fail the caller
            return self._give_up(url, 0, None, f"cannot build body: {type(e).__name__}: {e}")
        return self._send_signed_body(url, body, secret=secret, now=now)

    def _send_signed_body(
        self, url: str, body: bytes, *, secret: bytes, now: Callable[[], float]
    ) -> Delivery:
        def request() -> tuple[bytes, dict[str, str]]:
            # Signed afresh per attempt: after a long backoff the first timestamp could be
            # outside the receiver's tolerance.
            headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
            headers.update(sign(body, secret=secret, timestamp=int(now())))
            return body, headers

        return self._deliver(url, request, teams=False)

    def _delay_s(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self._max_backoff_s)
        return min(self._backoff_s * 2.0 ** (attempt - 1), self._max_backoff_s)

    def _deliver(
        self,
        url: str,
        request: Callable[[], tuple[bytes, dict[str, str]]],
        *,
        teams: bool,
    ) -> Delivery:
        status: int | None = None
        error: str | None = None
        attempt = 0
        for attempt in range(1, self._attempts + 1):
            retry_after: float | None = None
            try:
                content, headers = request()
                response = self._client.post(url, content=content, headers=headers)
            except Exception as e:  # any transport failure (refused, timeout, bad URL, ...)
                status, error = None, f"{type(e).__name__}: {e}"
                retryable = isinstance(e, _TRANSIENT)
            else:
                status = response.status_code
                throttled = teams and _TEAMS_THROTTLED in response.text
                if response.is_success and not throttled:
                    if attempt > 1:
                        log.info("webhook %s delivered on attempt %d", redact_url(url), attempt)
                    return Delivery(url=url, ok=True, attempts=attempt, status=status, error=None)
                error = f"HTTP {status}: {response.text[:200]}"
                retryable = throttled or status == 429 or status >= 500
                retry_after = _retry_after_s(response)
            if not retryable or attempt == self._attempts:
                break
            delay = self._delay_s(attempt, retry_after)
            log.warning(
                "webhook %s attempt %d/%d failed (%s); retrying in %.1fs",
                redact_url(url),
                attempt,
                self._attempts,
                error,
                delay,
            )
            self._sleep(delay)
        return self._give_up(url, attempt, status, error)

    def _give_up(self, url: str, attempts: int, status: int | None, error: str | None) -> Delivery:
        log.error("webhook %s failed after %d attempt(s): %s", redact_url(url), attempts, error)
        return Delivery(url=url, ok=False, attempts=attempts, status=status, error=error)
