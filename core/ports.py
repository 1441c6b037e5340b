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
    def waiting_runs(self) -> list[Doc]: ...
    def get_target_lock(self, key: str) -> Doc: ...  # raises NotFound
    def create_target_lock(self, doc: Doc) -> Doc: ...  # raises Conflict
    def replace_target_lock(self, doc: Doc) -> Doc: ...  # if-match; raises Conflict
    def create_activity(self, doc: Doc) -> bool: ...  # False when already seen
    def create_item(self, doc: Doc) -> Doc: ...  # raises Conflict
    def get_item(self, run_id: str, item_id: str) -> Doc: ...
    def replace_item(self, doc: Doc) -> Doc: ...  # if-match doc["_etag"]; raises Conflict
    def list_items(self, run_id: str) -> list[Doc]: ...
    def create_result(self, doc: Doc) -> bool: ...  # False when it already existed
    def get_result(self, run_id: str, item_id: str) -> Doc: ...
    def list_results(self, run_id: str) -> list[Doc]: ...
    def create_aggregate(self, doc: Doc) -> bool: ...  # False when it already existed
    def list_aggregates(self, run_id: str) -> list[Doc]: ...
    def create_series_point(self, doc: Doc) -> bool: ...
    def list_series_points(self, series_key: str) -> list[Doc]: ...
    def list_all_series_points(self) -> list[Doc]: ...
    def create_regression(self, doc: Doc) -> bool: ...
    def list_regressions(self, series_key: str | None = None) -> list[Doc]: ...
    def get_regression(self, series_key: str, regression_id: str) -> Doc: ...
    def replace_regression(self, doc: Doc) -> Doc: ...
    def create_schedule(self, doc: Doc) -> Doc: ...
    def get_schedule(self, schedule_id: str) -> Doc: ...
    def replace_schedule(self, doc: Doc) -> Doc: ...
    def delete_schedule(self, schedule_id: str) -> None: ...
    def list_schedules(self) -> list[Doc]: ...


class Artifacts(Protocol):
    """Large outputs in Blob Storage, addressed by run, owner (an item or a step) and name.
    Contents are stored exactly as given (the caller compresses)."""

    def put(self, run_id: str, owner: str, name: str, data: bytes) -> None: ...
    def get(self, run_id: str, owner: str, name: str) -> bytes: ...  # raises NotFound
    def size(self, run_id: str, owner: str, name: str) -> int: ...  # raises NotFound


class Queue(Protocol):
    def send(self, item: WorkItem) -> None: ...
    def send_poison(self, pool: str, body: str) -> None: ...


class Notifier(Protocol):
    """Tells people about a regression found for the first time; never raises."""

    def notify(self, regression: Doc) -> list[dict[str, Any]]: ...
    def post_result(
        self, door: str, teams_message: dict[str, Any], payload: dict[str, Any]
    ) -> list[dict[str, Any]]: ...


class NoNotifier:
    def notify(self, regression: Doc) -> list[dict[str, Any]]:
        return []

    def post_result(
        self, door: str, teams_message: dict[str, Any], payload: dict[str, Any]
    ) -> list[dict[str, Any]]:
        return []
