"""Run ids and the plan of steps and work items for a request (pure)."""

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
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def item_id(run_id: str, step: int, client: int) -> str:
    return f"{run_id}.s{step}.c{client}"


def step_id(run_id: str, step: int) -> str:
    return f"{run_id}.s{step}"


def plan_step(run_id: str, request: RunRequest, step: int) -> list[WorkItem]:
    """One work item per client of ``step``; each goes to a distinct agent."""
    clients = request.steps[step]
    return [
        WorkItem(
            run_id=run_id,
            item_id=item_id(run_id, step, c),
            step=step,
            client=c,
            clients=clients,
            pool=request.pool,
            targets=request.all_targets,
            engine=request.engine,
            workload=request.workload,
            barrier_timeout_s=request.barrier_timeout_s,
        )
        for c in range(clients)
    ]
