"""Regression notifications delivered for real to a local HTTP receiver on 127.0.0.1 (no
other network): signed webhooks, Teams messages, retries and what is not retried (the pure
card, body and signature: tests/test_notify_payloads.py)."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from adapters.webhook import Delivery, WebhookSender, redact_url
from core.monitoring.notify import teams_card, verify, webhook_body
from core.teams import teams_url_kind
from tests import loopback
from tests.loopback import Quiet
from tests.notify_samples import BASE_URL, REGRESSION, SECRET

# --- integration: a real receiver on 127.0.0.1 ------------------------------------------


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """A local HTTP server answering POSTs with a scripted list of (status, headers, body)."""

    script: list[tuple[int, dict[str, str], bytes]]
    default: tuple[int, dict[str, str], bytes] = (200, {}, b"ok")
    requests: list[Received] = field(default_factory=list)
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_response(self, req: Received) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            self.requests.append(req)
            return self.script.pop(0) if self.script else self.default


def _handler_for(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(Quiet):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            req = Received(self.path, dict(self.headers.items()), self.rfile.read(length))
            status, headers, body = receiver.next_response(req)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@pytest.fixture
def serve() -> Iterator[Callable[..., Receiver]]:
    servers: list[ThreadingHTTPServer] = []

    def start(
        script: list[tuple[int, dict[str, str], bytes]] | None = None,
        default: tuple[int, dict[str, str], bytes] = (200, {}, b"ok"),
    ) -> Receiver:
        receiver = Receiver(script=list(script or []), default=default)
        server, receiver.url = loopback.serve(_handler_for(receiver), "/hook/abc?sig=xyz")
        servers.append(server)
        return receiver

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    # trust_env=False: never route the loopback requests through an environment proxy.
    with httpx.Client(timeout=5.0, trust_env=False) as c:
        yield c


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def test_signed_webhook_arrives_once_and_verifies(
    serve: Callable[..., Receiver], client: httpx.Client
) -> None:
    receiver = serve()
    sleeps = Sleeps()
    sender = WebhookSender(client=client, sleep=sleeps)
    delivery = sender.send_signed(
        receiver.url, REGRESSION, base_url=BASE_URL, secret=SECRET, now=lambda: 1_800_000_000.7
    )
    assert delivery == Delivery(url=receiver.url, ok=True, attempts=1, status=200, error=None)
    assert len(receiver.requests) == 1
    req = receiver.requests[0]
    assert req.path == "/hook/abc?sig=xyz"
    assert req.headers["Content-Type"] == "application/json"
    assert req.headers["X-Bench-Timestamp"] == "1800000000"
    assert verify(req.body, req.headers, secret=SECRET, now=1_800_000_010)
    assert not verify(req.body, req.headers, secret=b"wrong", now=1_800_000_010)
    assert json.loads(req.body)["regression"]["id"] == "reg-0001"
    assert sleeps.calls == []


def test_teams_message_arrives(serve: Callable[..., Receiver], client: httpx.Client) -> None:
    receiver = serve()
    delivery = WebhookSender(client=client, sleep=Sleeps()).send_teams(
        receiver.url, REGRESSION, base_url=BASE_URL
    )
    assert delivery.ok and delivery.attempts == 1
    (req,) = receiver.requests
    assert json.loads(req.body) == teams_card(REGRESSION, base_url=BASE_URL).model_dump(mode="json")


def test_retries_500_then_succeeds_and_resigns(
    serve: Callable[..., Receiver], client: httpx.Client
) -> None:
    receiver = serve(script=[(500, {}, b"boom"), (500, {}, b"boom")])
    sleeps = Sleeps()
    clock = iter([1000.0, 1005.0, 1010.0])
    sender = WebhookSender(client=client, backoff_s=0.5, max_backoff_s=8.0, sleep=sleeps)
    delivery = sender.send_signed(
        receiver.url, REGRESSION, base_url=BASE_URL, secret=SECRET, now=lambda: next(clock)
    )
    assert delivery.ok
    assert delivery.attempts == 3
    assert delivery.status == 200
    assert len(receiver.requests) == 3
    assert sleeps.calls == [0.5, 1.0]  # exponential, no real sleeping
    stamps = [r.headers["X-Bench-Timestamp"] for r in receiver.requests]
    assert stamps == ["1000", "1005", "1010"]  # fresh signature per attempt
    for r in receiver.requests:
        assert verify(r.body, r.headers, secret=SECRET, now=int(r.headers["X-Bench-Timestamp"]))


def test_always_500_gives_up_without_raising(
    serve: Callable[..., Receiver], client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    receiver = serve(default=(503, {}, b"down"))
    sleeps = Sleeps()
    sender = WebhookSender(
        client=client, attempts=5, backoff_s=1.0, max_backoff_s=3.0, sleep=sleeps
    )
    with caplog.at_level(logging.WARNING, logger="adapters.webhook"):
        delivery = sender.send_signed(receiver.url, REGRESSION, base_url=BASE_URL, secret=SECRET)
    assert not delivery.ok
    assert delivery.attempts == 5
    assert delivery.status == 503
    assert delivery.error is not None and "503" in delivery.error
    assert len(receiver.requests) == 5
    assert sleeps.calls == [1.0, 2.0, 3.0, 3.0]  # capped; no sleep after the last attempt
    # Neither the secret nor the URL's path/query (credentials for Teams) reach the log.
    assert caplog.records
    assert SECRET.decode() not in caplog.text
    assert "sig=xyz" not in caplog.text and "/hook/abc" not in caplog.text


def test_unreachable_port_gives_up_without_raising(client: httpx.Client) -> None:
    # A port that was free a moment ago and now has no listener: connection refused.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = Sleeps()
    url = f"http://127.0.0.1:{port}/hook"
    delivery = WebhookSender(client=client, attempts=3, sleep=sleeps).send_teams(
        url, REGRESSION, base_url=BASE_URL
    )
    assert not delivery.ok
    assert delivery.attempts == 3
    assert delivery.status is None
    assert delivery.error is not None and "ConnectError" in delivery.error
    assert sleeps.calls == [0.5, 1.0]


def test_400_is_not_retried(serve: Callable[..., Receiver], client: httpx.Client) -> None:
    receiver = serve(default=(400, {}, b"bad card"))
    sleeps = Sleeps()
    delivery = WebhookSender(client=client, sleep=sleeps).send_teams(
        receiver.url, REGRESSION, base_url=BASE_URL
    )
    assert not delivery.ok
    assert delivery.attempts == 1
    assert delivery.status == 400
    assert delivery.error == "HTTP 400: bad card"
    assert len(receiver.requests) == 1
    assert sleeps.calls == []


def test_429_honours_retry_after_capped(
    serve: Callable[..., Receiver], client: httpx.Client
) -> None:
    receiver = serve(script=[(429, {"Retry-After": "2"}, b""), (429, {"Retry-After": "120"}, b"")])
    sleeps = Sleeps()
    delivery = WebhookSender(client=client, max_backoff_s=8.0, sleep=sleeps).send_signed(
        receiver.url, REGRESSION, base_url=BASE_URL, secret=SECRET
    )
    assert delivery.ok and delivery.attempts == 3
    assert sleeps.calls == [2.0, 8.0]


def test_teams_throttle_in_2xx_body_is_retried(
    serve: Callable[..., Receiver], client: httpx.Client
) -> None:
    # Legacy connectors report throttling in a 2xx body instead of a 429.
    body = b"Microsoft Teams endpoint returned HTTP error 429 with ContextId ..."
    receiver = serve(script=[(200, {}, body)])
    sleeps = Sleeps()
    delivery = WebhookSender(client=client, sleep=sleeps).send_teams(
        receiver.url, REGRESSION, base_url=BASE_URL
    )
    assert delivery.ok and delivery.attempts == 2
    assert sleeps.calls == [0.5]


def test_unserialisable_regression_does_not_raise(client: httpx.Client) -> None:
    bad: dict[str, Any] = {**REGRESSION, "before": {"mean": 1.0, "std": 0.1}, "x": {1, 2}}
    # A set is not JSON: the body falls back to str() for it rather than failing.
    sender = WebhookSender(client=client, sleep=Sleeps())
    assert json.loads(webhook_body(bad, base_url=BASE_URL))["regression"]["x"] == "{1, 2}"
    broken: Any = {"metric": "m", "before": 5}  # not a mapping: rendered n/a, not an error
    card = teams_card(broken, base_url=BASE_URL).model_dump(mode="json")
    assert card["attachments"][0]["content"]["actions"] == []
    # An invalid URL is a failed Delivery, not an exception.
    delivery = sender.send_teams("not a url", REGRESSION, base_url=BASE_URL)
    assert not delivery.ok and delivery.attempts == 1 and delivery.status is None


# --- Teams Workflows webhooks (Office 365 connectors were retired) ---------------------------

WORKFLOWS_LOGIC_APPS = (
    "https://prod-12.westeurope.logic.azure.com:443/workflows/0a1b2c3d4e5f/triggers/manual/"
    "paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=SECRET"
)
WORKFLOWS_POWER_PLATFORM = (
    "https://default0a1b2c.3d.environment.api.powerplatform.com:443/powerautomate/automations/"
    "direct/workflows/9f8e7d/triggers/manual/paths/invoke?api-version=1&sp=%2Ftriggers%2F"
    "manual%2Frun&sv=1.0&sig=SECRET"
)
CONNECTOR = "https://contoso.webhook.office.com/webhookb2/abc@def/IncomingWebhook/xyz/uvw"


def test_teams_urls_are_told_apart_by_their_shape() -> None:
    assert teams_url_kind(WORKFLOWS_LOGIC_APPS) == "workflows"
    assert teams_url_kind(WORKFLOWS_POWER_PLATFORM) == "workflows"
    assert teams_url_kind(CONNECTOR) == "connector"
    assert teams_url_kind("https://outlook.office.com/webhook/abc/IncomingWebhook/x") == "connector"
    assert teams_url_kind("https://relay.contoso.com/teams") == "other"
    # Their secrets (sig=, the path) stay out of logs.
    assert redact_url(WORKFLOWS_LOGIC_APPS) == "https://prod-12.westeurope.logic.azure.com:443/…"


def test_the_card_travels_in_the_envelope_the_workflows_template_reads() -> None:
    """ "Post to a channel when a webhook request is received" posts each attachment of a
    `message`: contentType application/vnd.microsoft.card.adaptive, contentUrl, content."""
    message = teams_card(REGRESSION, base_url=BASE_URL).model_dump(mode="json")
    assert message["type"] == "message"
    (attachment,) = message["attachments"]
    assert set(attachment) == {"contentType", "contentUrl", "content"}
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert attachment["contentUrl"] is None
    card = attachment["content"]
    assert (card["type"], card["version"]) == ("AdaptiveCard", "1.4")
    assert {a["type"] for a in card["actions"]} == {"Action.OpenUrl"}


def test_a_workflows_webhook_takes_the_card_with_202_accepted(
    serve: Callable[..., Receiver], client: httpx.Client
) -> None:
    receiver = serve(default=(202, {}, b""))  # Workflows answer 202 with no body
    base = receiver.url.split("/hook/", 1)[0]
    url = f"{base}/workflows/0a1b/triggers/manual/paths/invoke?api-version=2016-06-01&sig=S"
    assert teams_url_kind(url) == "workflows"
    delivery = WebhookSender(client=client, sleep=Sleeps()).send_teams(
        url, REGRESSION, base_url=BASE_URL
    )
    assert (delivery.ok, delivery.status, delivery.attempts) == (True, 202, 1)
    (req,) = receiver.requests
    assert json.loads(req.body) == teams_card(REGRESSION, base_url=BASE_URL).model_dump(mode="json")


def test_a_retired_connector_url_is_not_tried_and_says_what_to_do(
    serve: Callable[..., Receiver], client: httpx.Client
) -> None:
    receiver = serve()
    base = receiver.url.split("/hook/", 1)[0]
    url = f"{base}/webhookb2/abc@def/IncomingWebhook/xyz/uvw"
    delivery = WebhookSender(client=client, sleep=Sleeps()).send_teams(
        url, REGRESSION, base_url=BASE_URL
    )
    assert (delivery.ok, delivery.attempts, delivery.status) == (False, 0, None)
    assert delivery.error is not None and "Teams Workflows webhook" in delivery.error
    assert receiver.requests == []
