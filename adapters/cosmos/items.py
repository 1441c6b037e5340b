"""A run's steps and work items (partition /run_id: read together with one
single-partition query). Step documents hold the start barrier's state."""

from __future__ import annotations

from adapters.cosmos.base import Container
from core.models.ids import step_id
from core.models.stored import Item, Step


class CosmosItems:
    def __init__(self, container: Container) -> None:
        self._c = container

    def create_step(self, step: Step) -> Step:
        return Step.model_validate(self._c.create(step.doc()))

    def create_item(self, item: Item) -> Item:
        return Item.model_validate(self._c.create(item.doc()))

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
        steps = [Step.model_validate(d) for d in docs if d.get("kind") == "step"]
        items = [Item.model_validate(d) for d in docs if d.get("kind", "item") == "item"]
        return steps, items

    def overdue_barriers(self, now_ms: int) -> list[Step]:
        """Steps whose barrier deadline has passed with no start instant and no failure."""
        docs = self._c.query(
            "SELECT * FROM c WHERE c.kind = 'step' AND IS_NUMBER(c.deadline_ms) "
            "AND c.deadline_ms < @now AND IS_NULL(c.start_at_ms) AND IS_NULL(c.failed_reason)",
            [{"name": "@now", "value": now_ms}],
        )
        return [Step.model_validate(d) for d in docs]
