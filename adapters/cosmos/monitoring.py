"""Series points and regressions (partition /series_key: a series' history is one
single-partition query), schedules (/id) and the bots' seen activities (/id)."""

from __future__ import annotations

from adapters.cosmos.base import Container
from core.errors import NotFound
from core.models.activity import SeenActivity
from core.models.regression import Regression
from core.models.schedule import StoredSchedule, readable_schedules
from core.models.series import PointFacts, StepPoint


class CosmosSeries:
    def __init__(self, points: Container, regressions: Container) -> None:
        self._p = points
        self._r = regressions

    def create_point(self, point: StepPoint) -> bool:
        return self._p.create_once(point.doc())

    def points(self, series_key: str) -> list[StepPoint]:
        docs = self._p.query(
            "SELECT * FROM c WHERE c.series_key = @k",
            [{"name": "@k", "value": series_key}],
            pk=series_key,
        )
        return [StepPoint.model_validate(d) for d in docs]

    def all_points(self) -> list[PointFacts]:
        # No GROUP BY or DISTINCT in the local server's SQL: the caller groups in Python.
        docs = self._p.query(
            "SELECT c.series_key, c.target, c.time_ms, c.clients, c.engine, c.workload FROM c",
            [],
        )
        return [PointFacts.model_validate(d) for d in docs]

    def create_regression(self, regression: Regression) -> bool:
        return self._r.create_once(regression.doc())

    def regressions(self, series_key: str | None = None) -> list[Regression]:
        if series_key is None:
            docs = self._r.query("SELECT * FROM c", [])
        else:
            docs = self._r.query(
                "SELECT * FROM c WHERE c.series_key = @k",
                [{"name": "@k", "value": series_key}],
                pk=series_key,
            )
        return [Regression.model_validate(d) for d in docs]

    def get_regression(self, series_key: str, regression_id: str) -> Regression:
        return Regression.model_validate(self._r.read(regression_id, series_key))

    def replace_regression(self, regression: Regression) -> Regression:
        return Regression.model_validate(self._r.replace(regression.doc(), regression.etag))


class CosmosSchedules:
    def __init__(self, container: Container) -> None:
        self._c = container

    def create(self, schedule: StoredSchedule) -> StoredSchedule:
        return StoredSchedule.model_validate(self._c.create(schedule.doc()))

    def get(self, schedule_id: str) -> StoredSchedule:
        return StoredSchedule.model_validate(self._c.read(schedule_id, schedule_id))

    def replace(self, schedule: StoredSchedule) -> StoredSchedule:
        return StoredSchedule.model_validate(self._c.replace(schedule.doc(), schedule.etag))

    def delete(self, schedule_id: str) -> None:
        self._c.delete(schedule_id, schedule_id)

    def all(self) -> list[StoredSchedule]:
        return readable_schedules(self._c.query("SELECT * FROM c", []))


class CosmosActivities:
    def __init__(self, container: Container) -> None:
        self._c = container

    def create(self, seen: SeenActivity) -> bool:
        return self._c.create_once(seen.model_dump(mode="json"))


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
