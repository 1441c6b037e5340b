"""Client results and step aggregates (partition /run_id). Ids are deterministic (the item
id; ``<run>.s<step>``), so a redelivered item or two racing timers write each once. The
models become JSON here, and JSON models, on the way in and out."""

from __future__ import annotations

from adapters.cosmos.base import Container, Doc
from core.models import Result, StepAggregate, StoredResult


def _fields(doc: Doc) -> Doc:
    """Without Cosmos DB's system properties (``_etag``, ``_ts``)."""
    return {k: v for k, v in doc.items() if not k.startswith("_")}


class CosmosResults:
    def __init__(self, results: Container, aggregates: Container) -> None:
        self._r = results
        self._a = aggregates

    def create(self, result: Result) -> bool:
        return self._r.create_once(result.model_dump(mode="json"))

    def get(self, run_id: str, item_id: str) -> StoredResult:
        return StoredResult.model_validate(_fields(self._r.read(item_id, run_id)))

    def of_run(self, run_id: str) -> list[StoredResult]:
        docs = self._r.query(
            "SELECT * FROM c WHERE c.run_id = @r", [{"name": "@r", "value": run_id}], pk=run_id
        )
        return [StoredResult.model_validate(_fields(d)) for d in docs]

    def create_aggregate(self, aggregate: StepAggregate) -> bool:
        return self._a.create_once(aggregate.model_dump(mode="json"))

    def list_aggregates(self, run_id: str) -> list[StepAggregate]:
        docs = self._a.query(
            "SELECT * FROM c WHERE c.run_id = @r", [{"name": "@r", "value": run_id}], pk=run_id
        )
        return [StepAggregate.model_validate(_fields(d)) for d in docs]
