"""Storing a result reads its item once (issue 29.2: at 1,000 clients the results arrive
together, behind 3,000 artifact puts, and every call of each costs the API's CPU): the
compare-and-swap that completes the item starts from the copy read to check the holder."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from core.artifacts import ref
from core.models.stored import Item
from core.timestamps import iso_ms
from simagent.measured import Measurements
from tests.test_thousand_clients import HOST, RATE, World


@pytest.mark.unit
def test_a_result_reads_its_item_once_and_a_stale_copy_is_read_again() -> None:
    world = World(2)
    run_id, start = world.started_and_measured()
    made = Measurements()
    reads: list[int] = []
    for n, (w, agent) in enumerate(world.claimed):
        m = made.of(w, RATE, agent_id=agent.id, host=HOST, scheduled_ms=start, started_ms=start)
        for name, data in m.artifacts.items():
            world.service.put_artifact(w.run_id, w.item_id, name, data, agent)
        body = m.result.model_copy(
            update={"artifacts": {k: ref(k, v) for k, v in m.artifacts.items()}}
        ).model_dump(mode="json")
        get_item = world.store.items.get_item
        if n == 1:  # its item changes between the read and the swap (a heartbeat's write)

            def then_written(run_id: str, item_id: str, real: Any = get_item) -> Item:
                got: Item = real(run_id, item_id)
                world.store.items.get_item = real  # type: ignore[method-assign]
                stamp = iso_ms(world.clock.ms())
                world.service.lifecycle.update_item(
                    run_id, item_id, lambda d: setattr(d, "heartbeat_at", stamp), read=got
                )
                return got

            world.store.items.get_item = then_written  # type: ignore[method-assign]
        before = Counter(world.hook.calls)
        assert world.service.store_result(body, agent)
        world.store.items.get_item = get_item  # type: ignore[method-assign]
        reads.append((Counter(world.hook.calls) - before)[("items", "read")])
    assert reads[0] == 1
    assert reads[1] == 2  # the stale copy failed its swap and was read again
    items = world.store.items.of_run(run_id)[1]
    assert {i.state for i in items} == {"completed"}
