"""Run ids, comparison keys and the ids of steps and items (pure): what every layer that
stores or reads a run names it by.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any


def new_run_id() -> str:
    return "r-" + uuid.uuid4().hex


def run_id_for_key(idempotency_key: str) -> str:
    """Same Idempotency-Key -> same run id, so a replay finds the run it created."""
    return "r-" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]


def body_hash(body: Any) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def comparison_key(
    engine: str, workload: Mapping[str, Any], targets: Sequence[str], clients: int | Sequence[int]
) -> str:
    """Results are comparable only when this matches: same engine, same fully resolved
    workload, same mounts, same client counts. Tags, times and ids play no part."""
    return body_hash(
        {"engine": engine, "workload": dict(workload), "targets": list(targets), "clients": clients}
    )[:16]


def item_id(run_id: str, step: int, client: int) -> str:
    return f"{run_id}.s{step}.c{client}"


def step_id(run_id: str, step: int) -> str:
    return f"{run_id}.s{step}"


def step_of_item(run_id: str, item: str) -> int | None:
    """The step an item id of this run names (``item_id``'s inverse), None if it names none."""
    prefix = f"{run_id}.s"
    if not item.startswith(prefix):
        return None
    number, sep, client = item[len(prefix) :].partition(".c")
    if not (sep and number.isdigit() and client.isdigit()):
        return None
    return int(number)
