"""What the core needs from the outside world. The adapters implement these protocols;
the core never imports an Azure SDK."""

from __future__ import annotations

from typing import Any, Protocol

from core.models import WorkItem

Doc = dict[str, Any]


class Store(Protocol):
    def create_run(self, doc: Doc) -> Doc: ...  # raises Conflict if the id exists
    def get_run(self, run_id: str) -> Doc: ...  # raises NotFound
    def replace_run(self, doc: Doc) -> Doc: ...  # if-match doc["_etag"]; raises Conflict
    def query_runs(
        self,
        *,
        target: str | None,
        state: str | None,
        tag: tuple[str, str] | None,
        limit: int,
        continuation: str | None,
    ) -> tuple[list[Doc], str | None]: ...
    def active_runs(self) -> list[Doc]: ...
    def create_item(self, doc: Doc) -> Doc: ...  # raises Conflict
    def get_item(self, run_id: str, item_id: str) -> Doc: ...
    def replace_item(self, doc: Doc) -> Doc: ...  # if-match doc["_etag"]; raises Conflict
    def list_items(self, run_id: str) -> list[Doc]: ...
    def create_result(self, doc: Doc) -> bool: ...  # False when it already existed
    def get_result(self, run_id: str, item_id: str) -> Doc: ...
    def list_results(self, run_id: str) -> list[Doc]: ...
    def create_aggregate(self, doc: Doc) -> bool: ...  # False when it already existed
    def list_aggregates(self, run_id: str) -> list[Doc]: ...


class Queue(Protocol):
    def send(self, item: WorkItem) -> None: ...
    def send_poison(self, pool: str, body: str) -> None: ...
