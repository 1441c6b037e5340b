"""An item's heartbeat (every 2 s from each agent while it holds the item) writes only when
there is something to record: its move to running once the step's instant has passed, or
a sign of life older than HEARTBEAT_RECORD_S (issue 17.7: what the service costs on the
cores fio runs on). Through the real store; the service's clock is moved, not mocked."""

from __future__ import annotations

import time

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues
from benchctl.localstack import Stack
from core.models.holder import AgentRef
from core.models.state import ItemState
from core.runs.agent_reports import HEARTBEAT_RECORD_S
from core.runs.service import RunService
from tests.conftest import Clock, run_body


def test_heartbeats_write_only_a_move_or_a_stale_sign_of_life(
    stack: Stack, store: CosmosStore, queues: WorkQueues, artifacts: BlobArtifacts, pool: str
) -> None:
    clock = Clock()
    service = RunService(store, queues, artifacts, pools=tuple(stack.pool_names), clock=clock)
    run, _ = service.submit(run_body(pool))
    item_id = f"{run.id}.s0.c0"
    agent = AgentRef("beat-test")
    work = store.items.get_item(run.id, item_id).work_item
    assert service.claim(work, agent=agent, dequeue_count=1, message_id="m").action == "run"
    go = service.ready(run.id, item_id, agent, 5_000)  # a long lead: the instant is ahead
    assert go.status == "go" and go.start_at_ms is not None

    def etag() -> str | None:
        return store.items.get_item(run.id, item_id).etag

    before = etag()
    assert service.heartbeat(run.id, item_id, agent) == {"cancel": False}
    assert etag() == before  # ready, the instant not yet come: nothing to write

    clock.offset = (go.start_at_ms / 1000 - time.time()) + 0.1  # past the instant
    service.heartbeat(run.id, item_id, agent)
    moved = store.items.get_item(run.id, item_id)
    assert moved.state == ItemState.RUNNING and moved.etag != before

    for _ in range(3):  # every 2 s while fio runs: no write
        service.heartbeat(run.id, item_id, agent)
    assert etag() == moved.etag

    clock.offset += HEARTBEAT_RECORD_S  # half a minute later its sign of life is recorded
    service.heartbeat(run.id, item_id, agent)
    later = store.items.get_item(run.id, item_id)
    assert later.etag != moved.etag and later.heartbeat_at != moved.heartbeat_at
