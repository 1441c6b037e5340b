"""Run ids and the plan of work items for a request (pure)."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from core.models import RunRequest, WorkItem


def new_run_id() -> str:
    return "r-" + uuid.uuid4().hex


def run_id_for_key(idempotency_key: str) -> str:
    """Same Idempotency-Key -> same run id, so a replay finds the run it created."""
    return "r-" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]


def body_hash(body: Any) -> str:
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def item_id(run_id: str, step: int, client: int) -> str:
    return f"{run_id}.s{step}.c{client}"


def plan_items(run_id: str, request: RunRequest) -> list[WorkItem]:
    """One work item per client of the (single) step."""
    return [
        WorkItem(
            run_id=run_id,
            item_id=item_id(run_id, 0, c),
            step=0,
            client=c,
            clients=request.clients,
            pool=request.pool,
            target=request.target,
            engine=request.engine,
            workload=request.workload,
        )
        for c in range(request.clients)
    ]
