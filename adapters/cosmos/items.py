"""A run's steps and work items (partition /run_id: read together with one
single-partition query). Step documents hold the start barrier's state."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from azure.core.exceptions import AzureError
from azure.cosmos import exceptions as cx

from adapters.cosmos.base import Container, wrap
from core.errors import Conflict
from core.models.barrier_shard import BarrierShard, ClaimMark
from core.models.ids import step_id
from core.models.stored import Item, Step, steps_and_items

# Item documents created at once (create_items), as adapters/queue.py sends the messages.
CREATE_CONCURRENCY = 8


class CosmosItems:
    def __init__(self, container: Container) -> None:
        self._c = container

    def create_step(self, step: Step) -> Step:
        return Step.model_validate(self._c.create(step.doc()))

    def create_item(self, item: Item) -> Item:
        return Item.model_validate(self._c.create(item.doc()))

    def create_items(self, items: Sequence[Item]) -> None:
        """CREATE_CONCURRENCY at a time: one after another they were a quarter of a step's
        intake (issue 29)."""

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
