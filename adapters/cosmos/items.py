"""A run's steps and work items (partition /run_id: read together with one
single-partition query). Step documents hold the start barrier's state."""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from azure.core.exceptions import AzureError
from azure.cosmos import exceptions as cx

from adapters.cosmos.base import Container, wrap
from core.errors import Conflict, NotFound
from core.models.barrier_shard import BarrierShard, ClaimMark
from core.models.document import StoredJson
from core.models.ids import step_id
from core.models.stored import Item, Step, steps_and_items

# A run's item documents go to Cosmos DB in transactional batches, one request each, all
# or none, within the service's limits of 100 operations and 2 MB a batch
# (learn.microsoft.com/azure/cosmos-db/transactional-batch, "Limitations"): an item carries
# its work item, up to a message's 64 KiB, so a batch is cut by size as well.
BATCH_OPERATIONS = 100
BATCH_BYTES = 1_500_000
# Item documents created at once when a batch cannot be (some exist already: a replay).
CREATE_CONCURRENCY = 8
# A step's barrier shards read at once (get_shards).
READ_CONCURRENCY = 8


def batches(docs: Sequence[StoredJson]) -> list[list[StoredJson]]:
    """``docs`` in order, cut into batches of at most BATCH_OPERATIONS and BATCH_BYTES."""
    out: list[list[StoredJson]] = []
    size = 0
    for doc in docs:
        n = len(json.dumps(doc, separators=(",", ":")).encode())
        if not out or len(out[-1]) >= BATCH_OPERATIONS or size + n > BATCH_BYTES:
            out.append([])
            size = 0
        out[-1].append(doc)
        size += n
    return out


class CosmosItems:
    def __init__(self, container: Container) -> None:
        self._c = container

    def create_step(self, step: Step) -> Step:
        return Step.model_validate(self._c.create(step.doc()))

    def create_item(self, item: Item) -> Item:
        return Item.model_validate(self._c.create(item.doc()))

    def create_items(self, items: Sequence[Item]) -> None:
        """One request per batch of a run's items (issue 29.3: 32 creates, 8 at a time, took
        ~110 ms of a 32-client POST, and the API's CPU for 32 requests); when one of them
        exists already (a replay finishing an interrupted send), each is created on its own
        and those there are left as they are."""
        by_run: dict[str, list[Item]] = {}
        for item in items:
            by_run.setdefault(item.run_id, []).append(item)
        for run_id, of_run in by_run.items():
            docs = {i.id: i for i in of_run}
            for batch in batches([i.doc() for i in of_run]):
                try:
                    self._c.create_all(batch, run_id)
                except Conflict:
                    self._create_each([docs[d["id"]] for d in batch])

    def _create_each(self, items: Sequence[Item]) -> None:
        """CREATE_CONCURRENCY at a time, an item there already left as it is."""

        def create(item: Item) -> None:
            try:
                self.create_item(item)
            except Conflict:
                pass  # a replay finishing an interrupted send

        if len(items) <= 1:
            for item in items:
                create(item)
            return
        with ThreadPoolExecutor(min(CREATE_CONCURRENCY, len(items)), "item-create") as pool:
            futures = [pool.submit(create, i) for i in items]
        errors = [e for e in (f.exception() for f in futures) if e is not None]
        if errors:
            raise errors[0]

    def get_step(self, run_id: str, step: int) -> Step:
        return Step.model_validate(self._c.read(step_id(run_id, step), run_id))

    def get_item(self, run_id: str, item_id: str) -> Item:
        return Item.model_validate(self._c.read(item_id, run_id))

    def replace_step(self, step: Step) -> Step:
        return Step.model_validate(self._c.replace(step.doc(), step.etag))

    def replace_item(self, item: Item) -> Item:
        return Item.model_validate(self._c.replace(item.doc(), item.etag))

    def of_run(self, run_id: str) -> tuple[list[Step], list[Item]]:
        docs = self._c.query(
            "SELECT * FROM c WHERE c.run_id = @r ORDER BY c.id",
            [{"name": "@r", "value": run_id}],
            pk=run_id,
        )
        return steps_and_items(docs)

    def open_items(self, run_id: str, step: int) -> int:
        """How many of the step's items have not ended: one count in the run's partition,
        not the run's documents (an item's end asks it before advancing the run)."""
        sql = (
            "SELECT VALUE COUNT(1) FROM c WHERE c.run_id = @r AND c.kind = 'item' "
            "AND c.step = @s AND NOT (c.state IN ('completed', 'failed', 'cancelled'))"
        )
        params: list[dict[str, object]] = [
            {"name": "@r", "value": run_id},
            {"name": "@s", "value": step},
        ]
        try:
            found = self._c.proxy.query_items(sql, parameters=params, partition_key=run_id)
            counts: list[Any] = list(found)  # VALUE COUNT: plain numbers
            return sum(int(n) for n in counts)
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise wrap(e, f"count on {self._c.name}") from e

    def get_claim_mark(self, run_id: str, mark_id: str) -> ClaimMark:
        return ClaimMark.model_validate(self._c.read(mark_id, run_id))

    def put_claim_mark(self, mark: ClaimMark) -> None:
        self._c.upsert(mark.doc())

    def get_shard(self, run_id: str, shard_id: str) -> BarrierShard:
        return BarrierShard.model_validate(self._c.read(shard_id, run_id))

    def get_shards(self, run_id: str, shard_ids: Sequence[str]) -> dict[str, BarrierShard]:
        """Point reads, READ_CONCURRENCY at a time: the report that completes a step's set
        reads all 16 of its shards before it sets the start instant, and one after another
        they were 90-120 ms of that report at 32 clients (issue 29.3)."""

        def read(shard_id: str) -> BarrierShard | None:
            try:
                return self.get_shard(run_id, shard_id)
            except NotFound:
                return None

        with ThreadPoolExecutor(min(READ_CONCURRENCY, len(shard_ids) or 1), "shard-read") as pool:
            found = list(pool.map(read, shard_ids))
        return {i: s for i, s in zip(shard_ids, found, strict=True) if s is not None}

    def create_shard(self, shard: BarrierShard) -> BarrierShard:
        return BarrierShard.model_validate(self._c.create(shard.doc()))

    def replace_shard(self, shard: BarrierShard) -> BarrierShard:
        return BarrierShard.model_validate(self._c.replace(shard.doc(), shard.etag))

    def overdue_barriers(self, now_ms: int) -> list[Step]:
        """Steps whose barrier deadline has passed with no start instant and no failure."""
        docs = self._c.query(
            "SELECT * FROM c WHERE c.kind = 'step' AND IS_NUMBER(c.deadline_ms) "
            "AND c.deadline_ms < @now AND IS_NULL(c.start_at_ms) AND IS_NULL(c.failed_reason)",
            [{"name": "@now", "value": now_ms}],
        )
        return [Step.model_validate(d) for d in docs]
