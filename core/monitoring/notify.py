"""Regression notifications (pure, stdlib only): a Teams Adaptive Card and a signed JSON webhook.

Teams: the body is a ``message`` activity whose ``attachments`` hold one card of content type
``application/vnd.microsoft.card.adaptive``, the format Microsoft documents for incoming
webhooks ("Send Adaptive Cards using an Incoming Webhook", msteams-docs
``webhooks-and-connectors/how-to/connectors-using.md``). The same envelope is what the Teams
Workflows "Post to a channel when a webhook request is received" template reads, and Workflows
accept Adaptive Cards only (not the legacy MessageCard), so one format serves both.
Of the card actions, incoming webhooks support Action.OpenUrl (not Action.Submit).

Generic webhook: compact JSON with sorted keys, signed as
``HMAC-SHA256(secret, f"{timestamp}.".encode() + body)``. The timestamp is inside the MAC so a
captured request cannot be replayed outside the tolerance window.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from core import teams
from core.models.cards import Action, Element, TeamsMessage, TextBlock

EVENT = "regression.detected"
TIMESTAMP_HEADER = "X-Bench-Timestamp"
SIGNATURE_HEADER = "X-Bench-Signature"
_SIG_PREFIX = "sha256="


def links(regression: Mapping[str, Any], *, base_url: str) -> dict[str, str | None]:
    """API links to the first run after the change and to the whole series.

    Ids are percent-encoded as one path segment so a stored id can never alter the path.
    A missing id gives None rather than a broken link.
    """
    base = base_url.rstrip("/")
    run_id = regression.get("first_run_id")
    series_key = regression.get("series_key")
    return {
        "run": f"{base}/api/runs/{quote(str(run_id), safe='')}" if run_id else None,
        "series": f"{base}/api/series/{quote(str(series_key), safe='')}" if series_key else None,
    }


def fmt_number(value: Any) -> str:
    """A human-readable number: thousands separators for big values, 3 significant digits
    for small ones (latencies in seconds), the raw text for anything not numeric."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "n/a" if value is None else str(value)
    if not math.isfinite(v):
        return str(v)
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 1:
        return f"{v:,.2f}"
    if a == 0:
        return "0"
    return f"{v:.3g}"


def _mean_std(stats: Any) -> str:
    if not isinstance(stats, Mapping):
        return "n/a"
    if "median" in stats:  # the gate's reference (core.analysis.gate, rule 3)
        return f"median {fmt_number(stats.get('median'))} ± {fmt_number(stats.get('sd'))}"
    return f"{fmt_number(stats.get('mean'))} ± {fmt_number(stats.get('std'))}"


def _change_pct(value: Any) -> str:
    try:
        return f"{float(value):+.1f}%"
    except (TypeError, ValueError):
        return "n/a"


def _pvalue(value: Any) -> str:
    try:
        return f"{float(value):.2g}"
    except (TypeError, ValueError):
        return "n/a"


def teams_card(regression: Mapping[str, Any], *, base_url: str) -> TeamsMessage:
    """The JSON body to POST to a Teams incoming webhook (or Workflows webhook)."""
    kind = str(regression.get("kind") or "change")
    metric = str(regression.get("metric") or "?")
    before = _mean_std(regression.get("before"))
    after = _mean_std(regression.get("after"))
    # Red for a regression, green for an improvement; anything else stays neutral.
    color = {"regression": "Attention", "improvement": "Good"}.get(kind, "Default")
    facts = [
        ("Metric", metric),
        ("Target", str(regression.get("target") or "n/a")),
        ("Before", before),
        ("After", after),
        ("Change", _change_pct(regression.get("change_pct"))),
        ("p-value", _pvalue(regression.get("pvalue"))),
        ("First run", str(regression.get("first_run_id") or "n/a")),
        ("Detected", str(regression.get("detected_at") or "n/a")),
    ]
    body: list[Element] = [
        TextBlock(text=f"Performance {kind}: {metric}", weight="Bolder", size="Large", color=color),
        TextBlock(text=f"{before} → {after} ({_change_pct(regression.get('change_pct'))})"),
        teams.facts(facts),
    ]
    urls = links(regression, base_url=base_url)
    actions: list[Action] = []
    if urls["run"]:
        actions.append(teams.open_url("Open run", urls["run"]))
    if urls["series"]:
        actions.append(teams.open_url("Open series", urls["series"]))
    return teams.card_message(body, actions)


def webhook_body(regression: Mapping[str, Any], *, base_url: str) -> bytes:
    """Compact, key-sorted JSON so the bytes (and so the signature) are deterministic."""
    payload = {
        "event": EVENT,
        "regression": dict(regression),
        "links": links(regression, base_url=base_url),
    }
    # default=str: a stored datetime or similar must not stop the notification.
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str).encode()


def _mac(body: bytes, *, secret: bytes, timestamp: int) -> str:
    return hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign(body: bytes, *, secret: bytes, timestamp: int) -> dict[str, str]:
    """Headers that authenticate ``body`` as sent at ``timestamp`` (unix seconds)."""
    return {
        TIMESTAMP_HEADER: str(int(timestamp)),
        SIGNATURE_HEADER: _SIG_PREFIX + _mac(body, secret=secret, timestamp=int(timestamp)),
    }


def _header(headers: Mapping[str, str], name: str) -> str | None:
    # HTTP header names are case-insensitive; receivers may hand us a lower-cased dict.
    if name in headers:
        return headers[name]
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def verify(
    body: bytes,
    headers: Mapping[str, str],
    *,
    secret: bytes,
    now: int,
    tolerance_s: int = 300,
) -> bool:
    """True when the signature matches and the timestamp is within ``tolerance_s`` of ``now``
    (either way: a future timestamp is as suspicious as a stale one)."""
    ts_text = _header(headers, TIMESTAMP_HEADER)
    signature = _header(headers, SIGNATURE_HEADER)
    if ts_text is None or signature is None:
        return False
    ts_text = ts_text.strip()
    if not ts_text.isascii() or not ts_text.isdigit():
        return False
    timestamp = int(ts_text)
    if abs(now - timestamp) > tolerance_s:
        return False
    expected = _SIG_PREFIX + _mac(body, secret=secret, timestamp=timestamp)
    # Bytes, not str: compare_digest raises on non-ASCII str, and a forged header may be any.
    return hmac.compare_digest(expected.encode(), signature.strip().encode("utf-8", "replace"))


def teams_signature(body: bytes, secret_b64: str) -> str:
    """What Teams puts in an outgoing webhook's ``Authorization: HMAC <...>``: Base64 of
    HMAC-SHA256 over the raw body, keyed with the Base64-decoded shared secret."""
    key = base64.b64decode(secret_b64)
    return base64.b64encode(hmac.new(key, body, hashlib.sha256).digest()).decode()


def verify_teams(body: bytes, authorization: str | None, secret_b64: str) -> bool:
    if not authorization or not authorization.startswith("HMAC "):
        return False
    expected = teams_signature(body, secret_b64)
    given = authorization[len("HMAC ") :].strip()
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace"))
