"""What reading a run costs (issue 17.6): a running run's view reads no results or
aggregates before there are any, and a finished run's view is kept and served for one
point read until its document changes. Over the Cosmos DB stand-in; the repositories'
calls are counted by wrapping them, not replaced."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues
from benchctl.localstack import Stack
from core.models.holder import AgentRef
from core.runs.service import RunService
from tests.conftest import result_from_capture, run_body


def counted(store: CosmosStore) -> collections.Counter[str]:
    calls: collections.Counter[str] = collections.Counter()

    def wrap(repo: Any, name: str, key: str) -> None:
        real: Callable[..., Any] = getattr(repo, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            calls[key] += 1
            return real(*args, **kwargs)

        setattr(repo, name, call)

    wrap(store.runs, "get", "run")
    wrap(store.items, "of_run", "items")
    wrap(store.results, "of_run", "results")
    wrap(store.results, "list_aggregates", "aggregates")
    return calls


def test_reading_a_run_reads_only_what_it_can_have(
    stack: Stack, store: CosmosStore, queues: WorkQueues, artifacts: BlobArtifacts, pool: str
) -> None:
    service = RunService(store, queues, artifacts, pools=tuple(stack.pool_names))
    run, _ = service.submit(run_body(pool))
    calls = counted(store)
    queued = service.get_run(run["id"])
    assert queued.state == "queued" and queued.aggregate is None
    assert calls == {"run": 1, "items": 1}  # no result nor aggregate can exist yet

    agent = AgentRef("view-test")
    item = store.items.get_item(run["id"], f"{run['id']}.s0.c0").work_item
    assert service.claim(item, agent=agent, dequeue_count=1, message_id="m").action == "run"
    assert service.ready(run["id"], item.item_id, agent, 10).status == "go"
    assert service.store_result(result_from_capture(item, agent.id), agent) is True

    calls.clear()
    done = service.get_run(run["id"])
    assert done.state == "completed" and done.aggregate is not None
    assert done.items[0].result is not None
    assert calls == {"run": 1, "items": 1, "results": 1, "aggregates": 1}

    # Read again: one point read of the run, the same view.
    calls.clear()
    with pytest.raises(ValidationError):  # nobody changes what others are given
        done.tags = {"scribbled": "yes"}  # type: ignore[misc]
    again = service.get_run(run["id"])
    assert calls == {"run": 1}
    assert again == done

    # A write to the run's document (a new ETag) makes the next read a full one.
    service.lifecycle.update_run(run["id"], lambda r: setattr(r, "tags", {"test": "again"}))
    calls.clear()
    changed = service.get_run(run["id"])
    assert changed.tags == {"test": "again"}
    assert calls == {"run": 1, "items": 1, "results": 1, "aggregates": 1}
