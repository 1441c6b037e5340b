"""Client results and step aggregates (partition /run_id). Ids are deterministic (the item
id; ``<run>.s<step>``), so a redelivered item or two racing timers write each once."""

from __future__ import annotations

from adapters.cosmos.base import Container, Doc


class CosmosResults:
    def __init__(self, results: Container, aggregates: Container) -> None:
        self._r = results
        self._a = aggregates

    def create(self, doc: Doc) -> bool:
        return self._r.create_once(doc)

    def get(self, run_id: str, item_id: str) -> Doc:
        return self._r.read(item_id, run_id)

    def of_run(self, run_id: str) -> list[Doc]:
        return self._r.query(
            "SELECT * FROM c WHERE c.run_id = @r", [{"name": "@r", "value": run_id}], pk=run_id
        )

    def create_aggregate(self, doc: Doc) -> bool:
        return self._a.create_once(doc)

    def list_aggregates(self, run_id: str) -> list[Doc]:
        return self._a.query(
            "SELECT * FROM c WHERE c.run_id = @r", [{"name": "@r", "value": run_id}], pk=run_id
        )
