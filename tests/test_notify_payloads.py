"""Regression notifications, the pure part: the Teams card, the webhook's body, its signature
and its verification, and URLs redacted for logs (deliveries: tests/test_notify.py)."""

from __future__ import annotations

import json

from adapters.webhook import redact_url
from core.monitoring.notify import sign, teams_card, verify, webhook_body
from tests.notify_samples import BASE_URL, REGRESSION, SECRET


def test_teams_card_envelope() -> None:
    msg = teams_card(REGRESSION, base_url=BASE_URL).model_dump(mode="json")
    assert msg["type"] == "message"
    assert len(msg["attachments"]) == 1
    att = msg["attachments"][0]
    assert att["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = att["content"]
    assert card["$schema"] == "http://adaptivecards.io/schemas/adaptive-card.json"
    assert card["type"] == "AdaptiveCard"
    assert card["version"] == "1.4"
    assert card["body"]
    json.dumps(msg)  # must be plain JSON


def test_teams_card_links() -> None:
    message = teams_card(REGRESSION, base_url=BASE_URL).model_dump(mode="json")
    actions = message["attachments"][0]["content"]["actions"]
    assert [a["type"] for a in actions] == ["Action.OpenUrl", "Action.OpenUrl"]
    urls = {a["url"] for a in actions}
    # The trailing slash of base_url must not double up.
    assert urls == {
        "https://bench.example.test/api/runs/r-0042",
        "https://bench.example.test/api/series/3f2a9c",
    }


def test_teams_card_numbers() -> None:
    card = teams_card(REGRESSION, base_url=BASE_URL).model_dump(mode="json")["attachments"][0][
        "content"
    ]
    facts = {f["title"]: f["value"] for f in card["body"][2]["facts"]}
    assert facts["Metric"] == "read.iops"
    assert facts["Target"] == "scratch"
    assert facts["Before"] == "50,000 ± 900"
    assert facts["After"] == "25,000 ± 700"
    assert facts["Change"] == "-50.0%"
    assert facts["p-value"] == "1e-09"
    assert facts["First run"] == "r-0042"
    title = card["body"][0]
    assert title["text"] == "Performance regression: read.iops"
    assert title["color"] == "Attention"
    assert card["body"][1]["text"] == "50,000 ± 900 → 25,000 ± 700 (-50.0%)"


def test_teams_card_small_values_and_missing_fields() -> None:
    reg = {
        "metric": "read.lat_p99_s",
        "kind": "improvement",
        "before": {"mean": 0.00123, "std": 0.0001},
        "after": {"mean": 0.0009, "std": None},
        "change_pct": "oops",
        "series_key": "a/b",
    }
    card = teams_card(reg, base_url=BASE_URL).model_dump(mode="json")["attachments"][0]["content"]
    facts = {f["title"]: f["value"] for f in card["body"][2]["facts"]}
    assert facts["Before"] == "0.00123 ± 0.0001"
    assert facts["After"] == "0.0009 ± n/a"
    assert facts["Change"] == "n/a"
    assert facts["p-value"] == "n/a"
    assert card["body"][0]["color"] == "Good"
    # No first run → no run link; the key is one escaped path segment.
    assert [a["url"] for a in card["actions"]] == ["https://bench.example.test/api/series/a%2Fb"]


def test_webhook_body_is_compact_sorted_json() -> None:
    body = webhook_body(REGRESSION, base_url=BASE_URL)
    doc = json.loads(body)
    assert doc["event"] == "regression.detected"
    assert doc["regression"] == REGRESSION
    assert doc["links"] == {
        "run": "https://bench.example.test/api/runs/r-0042",
        "series": "https://bench.example.test/api/series/3f2a9c",
    }
    assert body == json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    assert body.startswith(b'{"event":')


def test_sign_format() -> None:
    headers = sign(b"{}", secret=SECRET, timestamp=1_700_000_000)
    assert headers["X-Bench-Timestamp"] == "1700000000"
    assert headers["X-Bench-Signature"].startswith("sha256=")
    assert len(headers["X-Bench-Signature"]) == len("sha256=") + 64


def test_sign_known_vector() -> None:
    # Independent of our code: HMAC-SHA256 over "<ts>." + body, computed with stdlib directly.
    import hashlib
    import hmac

    expected = hmac.new(b"k", b"10.hello", hashlib.sha256).hexdigest()
    assert sign(b"hello", secret=b"k", timestamp=10)["X-Bench-Signature"] == f"sha256={expected}"


def test_verify_valid() -> None:
    body = webhook_body(REGRESSION, base_url=BASE_URL)
    headers = sign(body, secret=SECRET, timestamp=1000)
    assert verify(body, headers, secret=SECRET, now=1000)
    assert verify(body, headers, secret=SECRET, now=1300)  # at the edge of tolerance
    lower = {k.lower(): v for k, v in headers.items()}
    assert verify(body, lower, secret=SECRET, now=1000)


def test_verify_flipped_byte() -> None:
    body = webhook_body(REGRESSION, base_url=BASE_URL)
    headers = sign(body, secret=SECRET, timestamp=1000)
    tampered = bytearray(body)
    tampered[len(tampered) // 2] ^= 0x01
    assert not verify(bytes(tampered), headers, secret=SECRET, now=1000)


def test_verify_rejects_stale_future_wrong_secret_and_junk() -> None:
    body = b'{"a":1}'
    headers = sign(body, secret=SECRET, timestamp=1000)
    assert not verify(body, headers, secret=SECRET, now=1301)  # stale
    assert not verify(body, headers, secret=SECRET, now=699)  # from the future
    assert not verify(body, headers, secret=b"other", now=1000)
    assert not verify(body, {}, secret=SECRET, now=1000)
    assert not verify(body, {**headers, "X-Bench-Timestamp": "abc"}, secret=SECRET, now=1000)
    assert not verify(body, {**headers, "X-Bench-Signature": "sha256=é"}, secret=SECRET, now=1000)
    # The timestamp is under the MAC: moving it invalidates the signature.
    moved = {**headers, "X-Bench-Timestamp": "1001"}
    assert not verify(body, moved, secret=SECRET, now=1000)


def test_redact_url_hides_path_and_query() -> None:
    url = "https://example.webhook.office.com/webhookb2/abc@def/IncomingWebhook/xyz?sig=SECRET"
    assert redact_url(url) == "https://example.webhook.office.com/…"
