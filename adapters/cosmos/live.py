"""Items' live samples while they run (core.runs.live): one document per item, id = item
id, partition /run_id, so a run's are read with one single-partition query."""

from __future__ import annotations

from adapters.cosmos.base import Container
from core.models.live import LiveDoc


class CosmosLive:
    def __init__(self, container: Container) -> None:
        self._c = container

    def get(self, run_id: str, item_id: str) -> LiveDoc:
        return LiveDoc.model_validate(self._c.read(item_id, run_id))

    def put(self, doc: LiveDoc) -> LiveDoc:
        return LiveDoc.model_validate(self._c.upsert(doc.doc()))

    def of_run(self, run_id: str) -> list[LiveDoc]:
        # No ORDER BY: only run_id is indexed in this container (bicep/modules/cosmos.bicep).
        docs = self._c.query(
            "SELECT * FROM c WHERE c.run_id = @r", [{"name": "@r", "value": run_id}], pk=run_id
        )
        return sorted((LiveDoc.model_validate(d) for d in docs), key=lambda d: d.id)
