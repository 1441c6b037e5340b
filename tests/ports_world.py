"""The ports the contract tests run against (tests/test_ports_contract*.py): the in-memory
implementations the simulation drives (core.memory), or the adapters on the Cosmos DB
stand-in and Azurite; and the documents they write."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues
from benchctl.localstack import Stack
from core.memory import MemoryArtifacts, MemoryQueues, MemoryStore, SimClock
from core.models import WorkItem, Workload
from core.models.stored import Run
from core.ports import Artifacts, Store


@dataclass
class Ports:
    store: Store
    queues: WorkQueues | MemoryQueues
    artifacts: Artifacts
    now: Callable[[], float]  # the clock the store stamps _ts with
    wait: Callable[[float], None]  # let time pass
    pool: str


def contract_store(stack: Stack) -> CosmosStore:
    """The Cosmos DB stand-in, in a database no API's timer works on: the session API's
    advanced the runs and cleared the barriers these tests write (due, overdue) between two
    of their calls."""
    settings = stack.settings().model_copy(update={"cosmos_database": "ports-contract"})
    store = CosmosStore.from_settings(settings)
    store.ensure_containers()
    return store


def open_ports(request: pytest.FixtureRequest, pool: str) -> Iterator[Ports]:
    """The ``ports`` fixture's body: ``request.param`` is "memory" or "azure" (the session's
    stack, queues and artifacts fixtures)."""
    if request.param == "memory":
        clock = SimClock(time.time())
        queues = MemoryQueues(clock)
        queues.ensure_pool(pool)
        yield Ports(MemoryStore(clock), queues, MemoryArtifacts(), clock, clock.advance, pool)
        return
    yield Ports(
        contract_store(request.getfixturevalue("stack")),
        request.getfixturevalue("queues"),
        request.getfixturevalue("artifacts"),
        time.time,
        time.sleep,
        pool,
    )


def new_id() -> str:
    return "r-" + uuid.uuid4().hex


def a_run(pool: str, **fields: Any) -> Run:
    doc: dict[str, Any] = {
        "id": new_id(),
        "created_at": "2031-01-01T00:00:00Z",
        "created_ms": int(time.time() * 1000),
        "request": {"target": "scratch", "pool": pool},
        "workload": {},
        "comparison_key": "k",
        "target": "scratch",
        "targets": ["scratch"],
        "pool": pool,
        "step_count": 1,
        "items_total": 1,
        "requested_by": {"name": "t", "role": "admin"},
        "body_hash": "h",
    }
    doc.update(fields)
    return Run.model_validate(doc)


def work(run_id: str, pool: str, client: int = 0) -> WorkItem:
    return WorkItem(
        run_id=run_id,
        item_id=f"{run_id}.s0.c{client}",
        step=0,
        client=client,
        clients=client + 1,
        pool=pool,
        targets=["scratch"],
        engine="fio",
        workload=Workload(),
    )
