"""Schemathesis hooks for tests/test_openapi.py (loaded through SCHEMATHESIS_HOOKS).

Generated data is steered, not filtered: every value Schemathesis draws is still sent, but

- runs (and schedules' run templates) whose pool and target are well formed go to the pool
  and target no other test uses (FUZZ_POOL, FUZZ_TARGET: no agent listens there, so nothing
  runs), and a body naming both target and targets keeps target, so accepted runs happen;
- schedules are created and patched disabled (no fire time starts runs mid-session), and
  every other generated cron is replaced by a valid one, so creation is reached too;
- a result's item_id and id follow the URL's, so the checks behind them are reached;
- chat requests are signed with the session stack's secrets (a fresh Teams timestamp), so
  the bot doors parse generated bodies instead of stopping at 401.
"""

from __future__ import annotations

import json
import re
import time
import zlib
from datetime import UTC, datetime
from typing import Any

import schemathesis
from schemathesis.core import NotSet

from core.models import ALIAS_PATTERN, POOL_PATTERN, RESERVED_ALIAS_PATTERN
from core.notify import sign, teams_signature
from tests.conftest import BOT_SECRET, FUZZ_POOL, FUZZ_TARGET, TEAMS_BOT_SECRET_B64

VALID_CRON = "0 3 * * *"


def _alias(value: Any) -> bool:
    return (
        isinstance(value, str)
        and re.fullmatch(ALIAS_PATTERN, value) is not None
        and re.match(RESERVED_ALIAS_PATTERN, value) is None
    )


def _steer_run(run: dict[str, Any]) -> dict[str, Any]:
    run = dict(run)
    if "pool" not in run or (
        isinstance(run["pool"], str) and re.fullmatch(POOL_PATTERN, run["pool"])
    ):
        run["pool"] = FUZZ_POOL  # the default pool is other tests' "default"
    if _alias(run.get("target")):
        run["target"] = FUZZ_TARGET
        run.pop("targets", None)
    elif (
        isinstance(run.get("targets"), list) and run["targets"] and all(map(_alias, run["targets"]))
    ):
        run["targets"] = [FUZZ_TARGET]
    return run


def _coin(value: Any) -> bool:
    """A fair, reproducible coin: the same generated value always lands the same way."""
    return zlib.crc32(repr(value).encode("utf-8", "backslashreplace")) % 2 == 0


def _steer_schedule(body: dict[str, Any]) -> dict[str, Any]:
    body = dict(body)
    if isinstance(body.get("request"), dict):
        body["request"] = _steer_run(body["request"])
    if "enabled" in body or "cron" in body or "owner" in body:
        body["enabled"] = False
    if isinstance(body.get("cron"), str) and _coin(body["cron"]):
        body["cron"] = VALID_CRON
    return body


def _sign(case: Any, teams: bool) -> None:
    body = case.body
    if isinstance(body, NotSet):
        return
    if teams and isinstance(body, dict) and "id" in body:
        body = {**body, "timestamp": datetime.now(UTC).isoformat()}
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    case.body = raw  # sent as these bytes, so the signature covers exactly them
    case.headers = dict(case.headers or {}, **{"Content-Type": "application/json"})
    if teams:
        case.headers["Authorization"] = f"HMAC {teams_signature(raw, TEAMS_BOT_SECRET_B64)}"
    else:
        case.headers.update(sign(raw, secret=BOT_SECRET.encode(), timestamp=int(time.time())))


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    label = case.operation.label
    body = case.body
    if label == "POST /api/runs" and isinstance(body, dict):
        case.body = _steer_run(body)
    elif label in ("POST /api/schedules", "PATCH /api/schedules/{schedule_id}"):
        if isinstance(body, dict):
            case.body = _steer_schedule(body)
    elif label == "PUT /api/agent/results/{item_id}" and isinstance(body, dict):
        item_id = case.path_parameters.get("item_id")
        case.body = {**body, "item_id": item_id, "id": item_id}
    elif label == "POST /api/bot/teams":
        _sign(case, teams=True)
    elif label == "POST /api/bot/webhook":
        _sign(case, teams=False)
    return case
