"""The Teams bot's stored conversations (partition /id): a run's conversation and card
(``run.<run id>``) and a conversation's series subscriptions (``sub.<series>.<digest>``).
Both are few; the timer lists the open runs, a regression lists its series' subscribers."""

from __future__ import annotations

from azure.core.exceptions import AzureError
from azure.cosmos import exceptions as cx

from adapters.cosmos.base import Container, wrap
from core.models.document import StoredJson


class CosmosConversations:
    def __init__(self, container: Container) -> None:
        self._c = container

    def upsert(self, doc: StoredJson) -> None:
        try:
            self._c.proxy.upsert_item(doc)
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise wrap(e, f"conversations/{doc.get('id')}") from e

    def get(self, doc_id: str) -> StoredJson:
        return self._c.read(doc_id, doc_id)

    def delete(self, doc_id: str) -> None:
        self._c.delete(doc_id, doc_id)

    def open_runs(self) -> list[StoredJson]:
        return self._c.query("SELECT * FROM c WHERE c.kind = 'run' AND c.announced = false", [])

    def subscribers(self, series_key: str) -> list[StoredJson]:
        return self._c.query(
            "SELECT * FROM c WHERE c.kind = 'subscription' AND c.series_key = @k",
            [{"name": "@k", "value": series_key}],
        )
