"""A step's items are created in transactional batches (adapters/cosmos/items.py), and a
replay finishing an interrupted send finds some of them there already. Azure's batch is
all or none: one create that conflicts and none is made. The Cosmos DB stand-in makes the
creates before the one that conflicts (docs/local-stack.md). The adapter falls back to one
create per item, which leaves the same end state either way; tests/test_ports_contract.py's
replay conflicts on a batch's first item, where the two do not differ, so here only the
last item is there, and the ports contract (in memory and on the stand-in) is the end
state a replay needs: every item exactly once, the one there left as it was, the others as
given."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.models.state import ItemState
from core.models.stored import Item
from tests.ports_world import Ports, new_id, open_ports, work


@pytest.fixture(params=["memory", pytest.param("azure", marks=pytest.mark.stack)])
def ports(request: pytest.FixtureRequest, pool: str) -> Iterator[Ports]:
    yield from open_ports(request, pool)


def test_a_batch_whose_last_item_is_there_leaves_every_item_once(ports: Ports) -> None:
    items, run_id = ports.store.items, new_id()
    docs = []
    for c in range(8):
        w = work(run_id, ports.pool, c)
        docs.append(Item(id=w.item_id, run_id=run_id, step=0, client=c, work_item=w))
    # The replayed send's last item was created, then claimed, before the API died.
    there = docs[-1].model_copy(update={"state": ItemState.CLAIMED, "agent_id": "agent-7"})
    items.create_item(there)
    items.create_items(docs)
    got = sorted((i.doc() for i in items.of_run(run_id)[1]), key=lambda d: str(d["id"]))
    assert got == sorted([d.doc() for d in docs[:-1]] + [there.doc()], key=lambda d: d["id"])
