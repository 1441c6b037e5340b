"""Series points and regressions (partition /series_key: a series' history is one
single-partition query), schedules (/id) and the bots' seen activities (/id)."""

from __future__ import annotations

from adapters.cosmos.base import Container, Doc
from core.errors import NotFound


class CosmosSeries:
    def __init__(self, points: Container, regressions: Container) -> None:
        self._p = points
        self._r = regressions

    def create_point(self, doc: Doc) -> bool:
        return self._p.create_once(doc)

    def points(self, series_key: str) -> list[Doc]:
        return self._p.query(
            "SELECT * FROM c WHERE c.series_key = @k",
            [{"name": "@k", "value": series_key}],
            pk=series_key,
        )

    def all_points(self) -> list[Doc]:
        # No GROUP BY or DISTINCT in the local server's SQL: the caller groups in Python.
        return self._p.query(
            "SELECT c.series_key, c.target, c.time_ms, c.clients, c.engine, c.workload FROM c",
            [],
        )

    def create_regression(self, doc: Doc) -> bool:
        return self._r.create_once(doc)

    def regressions(self, series_key: str | None = None) -> list[Doc]:
        if series_key is None:
            return self._r.query("SELECT * FROM c", [])
        return self._r.query(
            "SELECT * FROM c WHERE c.series_key = @k",
            [{"name": "@k", "value": series_key}],
            pk=series_key,
        )

    def get_regression(self, series_key: str, regression_id: str) -> Doc:
        return self._r.read(regression_id, series_key)

    def replace_regression(self, doc: Doc) -> Doc:
        return self._r.replace(doc, doc.get("_etag"))


class CosmosSchedules:
    def __init__(self, container: Container) -> None:
        self._c = container

    def create(self, doc: Doc) -> Doc:
        return self._c.create(doc)

    def get(self, schedule_id: str) -> Doc:
        return self._c.read(schedule_id, schedule_id)

    def replace(self, doc: Doc) -> Doc:
        return self._c.replace(doc, doc.get("_etag"))

    def delete(self, schedule_id: str) -> None:
        self._c.delete(schedule_id, schedule_id)

    def all(self) -> list[Doc]:
        return self._c.query("SELECT * FROM c", [])


class CosmosActivities:
    def __init__(self, container: Container) -> None:
        self._c = container

    def create(self, doc: Doc) -> bool:
        return self._c.create_once(doc)


class CosmosTicks:
    """The timers' last complete ticks (/id: one document per timer)."""

    def __init__(self, container: Container) -> None:
        self._c = container

    def get(self, name: str) -> int | None:
        try:
            return int(self._c.read(name, name)["at_ms"])
        except NotFound:
            return None

    def put(self, name: str, at_ms: int) -> None:
        self._c.upsert({"id": name, "at_ms": at_ms})
