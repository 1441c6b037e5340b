"""The Store's repositories in memory, one per container, doing what the Cosmos DB
repositories do (adapters/cosmos/*.py: the same queries, orders and errors)."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Sequence

from core.errors import Conflict, FieldError, NotFound, StoreUnavailable, ValidationFailed
from core.memory.barrier_docs import BarrierDocs
from core.memory.documents import Faults, Table, Tables
from core.models import Result, StepAggregate, StoredResult
from core.models.activity import SeenActivity
from core.models.agents import AgentRecord
from core.models.document import StoredJson
from core.models.ids import step_id
from core.models.live import LiveDoc
from core.models.locks import TargetLock
from core.models.regression import Regression
from core.models.schedule import StoredSchedule, readable_schedules
from core.models.series import PointFacts, StepPoint
from core.models.state import TERMINAL
from core.models.stored import Item, Run, Step, steps_and_items
from core.models.ticks import TimerTick
from core.ports import CONTINUATION_PATTERN, Store

CONTINUATION_PREFIX = "memory-page:"


TOKEN = re.compile(CONTINUATION_PATTERN)


def _offset(continuation: str | None) -> int:
    """As the Cosmos DB adapter: 400 for what is not URL-safe Base64, 404 for a token of
    that form this listing did not give."""
    if continuation is None:
        return 0
    if not TOKEN.fullmatch(continuation):
        message = "not a continuation token: URL-safe Base64 as a listing gives it"
        raise ValidationFailed([FieldError("continuation", message)])
    unknown = NotFound(
        "no page of this listing has this continuation token (ask again without it)",
        "continuation",
    )
    try:
        text = base64.urlsafe_b64decode(continuation.encode("ascii")).decode("ascii")
    except ValueError:
        raise unknown from None
    if not text.startswith(CONTINUATION_PREFIX) or not text[len(CONTINUATION_PREFIX) :].isdigit():
        raise unknown
    return int(text[len(CONTINUATION_PREFIX) :])


def _token(offset: int) -> str:
    return base64.urlsafe_b64encode(f"{CONTINUATION_PREFIX}{offset}".encode()).decode()


def _null(doc: StoredJson, key: str) -> bool:
    """Cosmos SQL's IS_NULL: present and null (a missing field is undefined, not null)."""
    return key in doc and doc[key] is None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class MemoryRuns:
    def __init__(self, t: Table) -> None:
        self._t = t

    def create(self, run: Run) -> Run:
        return Run.model_validate(self._t.create(run.doc()))

    def get(self, run_id: str) -> Run:
        return Run.model_validate(self._t.read(run_id, run_id))

    def replace(self, run: Run) -> Run:
        return Run.model_validate(self._t.replace(run.doc(), run.etag))

    def page(
        self,
        *,
        target: str | None,
        state: str | None,
        tag: tuple[str, str] | None,
        limit: int,
        continuation: str | None,
    ) -> tuple[list[Run], str | None]:
        start = _offset(continuation)

        def keep(d: StoredJson) -> bool:
            return (
                (not target or target in d.get("targets", []))
                and (not state or d.get("state") == state)
                and (not tag or (d.get("tags") or {}).get(tag[0]) == tag[1])
            )

        docs = sorted(self._t.query(keep), key=lambda d: d["created_ms"], reverse=True)
        page = docs[start : start + limit]
        more = start + limit < len(docs) and page
        return [Run.model_validate(d) for d in page], _token(start + limit) if more else None

    def due(self, now_ms: int) -> list[Run]:
        docs = self._t.query(lambda d: _number(d.get("due_ms")) and d["due_ms"] <= now_ms)
        return [Run.model_validate(d) for d in docs]

    def active(self, pool: str) -> list[Run]:
        docs = self._t.query(
            lambda d: (
                d.get("pool") == pool and d.get("admitted") is True and d.get("finished") is False
            )
        )
        return [Run.model_validate(d) for d in docs]


class MemoryItems(BarrierDocs):
    def __init__(self, t: Table) -> None:
        self._t = t

    def create_step(self, step: Step) -> Step:
        return Step.model_validate(self._t.create(step.doc()))

    def create_item(self, item: Item) -> Item:
        return Item.model_validate(self._t.create(item.doc()))

    def create_items(self, items: Sequence[Item]) -> None:
        """One after another here (the simulation stays deterministic)."""
        errors: list[Exception] = []
        for item in items:
            try:
                self.create_item(item)
            except Conflict:
                pass
            except StoreUnavailable as e:
                errors.append(e)
        if errors:
            raise errors[0]

    def get_step(self, run_id: str, step: int) -> Step:
        return Step.model_validate(self._t.read(step_id(run_id, step), run_id))

    def get_item(self, run_id: str, item_id: str) -> Item:
        return Item.model_validate(self._t.read(item_id, run_id))

    def replace_step(self, step: Step) -> Step:
        return Step.model_validate(self._t.replace(step.doc(), step.etag))

    def replace_item(self, item: Item) -> Item:
        return Item.model_validate(self._t.replace(item.doc(), item.etag))

    def of_run(self, run_id: str) -> tuple[list[Step], list[Item]]:
        docs = sorted(self._t.query(lambda d: d.get("run_id") == run_id, pk=run_id), key=_id)
        return steps_and_items(docs)

    def open_items(self, run_id: str, step: int) -> int:
        ended = {str(s) for s in TERMINAL}
        return self._t.count(
            lambda d: (
                d.get("kind", "item") == "item"
                and d.get("step") == step
                and d.get("state") not in ended
            ),
            pk=run_id,
        )

    def overdue_barriers(self, now_ms: int) -> list[Step]:
        docs = self._t.query(
            lambda d: (
                d.get("kind") == "step"
                and _number(d.get("deadline_ms"))
                and d["deadline_ms"] < now_ms
                and _null(d, "start_at_ms")
                and _null(d, "failed_reason")
            )
        )
        return [Step.model_validate(d) for d in docs]


def _fields(doc: StoredJson) -> StoredJson:
    """Without the store's own properties (``_etag``)."""
    return {k: v for k, v in doc.items() if not k.startswith("_")}


def _id(doc: StoredJson) -> str:
    return str(doc["id"])


class MemoryTargets:
    def __init__(self, t: Table) -> None:
        self._t = t

    def get(self, key: str) -> TargetLock:
        return TargetLock.model_validate(self._t.read(key, key))

    def create(self, lock: TargetLock) -> TargetLock:
        return TargetLock.model_validate(self._t.create(lock.doc()))

    def replace(self, lock: TargetLock) -> TargetLock:
        return TargetLock.model_validate(self._t.replace(lock.doc(), lock.etag))

    def with_waiters(self) -> list[TargetLock]:
        docs = self._t.query(lambda d: len(d.get("queue") or []) > 0)
        return [
            TargetLock.model_validate({k: d[k] for k in ("id", "run_id", "since_ms") if k in d})
            for d in docs
        ]


class MemoryResults:
    def __init__(self, results: Table, aggregates: Table) -> None:
        self._r = results
        self._a = aggregates

    def create(self, result: Result) -> bool:
        return self._r.create_once(result.model_dump(mode="json"))

    def get(self, run_id: str, item_id: str) -> StoredResult:
        return StoredResult.model_validate(_fields(self._r.read(item_id, run_id)))

    def of_run(self, run_id: str) -> list[StoredResult]:
        docs = self._r.query(lambda d: d.get("run_id") == run_id, pk=run_id)
        return [StoredResult.model_validate(_fields(d)) for d in docs]

    def create_aggregate(self, aggregate: StepAggregate) -> bool:
        return self._a.create_once(aggregate.model_dump(mode="json"))

    def list_aggregates(self, run_id: str) -> list[StepAggregate]:
        docs = self._a.query(lambda d: d.get("run_id") == run_id, pk=run_id)
        return [StepAggregate.model_validate(_fields(d)) for d in docs]


POINT_FIELDS = ("series_key", "target", "time_ms", "clients", "engine", "workload")


class MemorySeries:
    def __init__(self, points: Table, regressions: Table) -> None:
        self._p = points
        self._r = regressions

    def create_point(self, point: StepPoint) -> bool:
        return self._p.create_once(point.doc())

    def points(self, series_key: str) -> list[StepPoint]:
        docs = self._p.query(lambda d: d.get("series_key") == series_key, pk=series_key)
        return [StepPoint.model_validate(d) for d in docs]

    def all_points(self) -> list[PointFacts]:
        return [
            PointFacts.model_validate({k: d[k] for k in POINT_FIELDS if k in d})
            for d in self._p.query(lambda d: True)
        ]

    def create_regression(self, regression: Regression) -> bool:
        return self._r.create_once(regression.doc())

    def regressions(self, series_key: str | None = None) -> list[Regression]:
        if series_key is None:
            docs = self._r.query(lambda d: True)
        else:
            docs = self._r.query(lambda d: d.get("series_key") == series_key, pk=series_key)
        return [Regression.model_validate(d) for d in docs]

    def get_regression(self, series_key: str, regression_id: str) -> Regression:
        return Regression.model_validate(self._r.read(regression_id, series_key))

    def replace_regression(self, regression: Regression) -> Regression:
        return Regression.model_validate(self._r.replace(regression.doc(), regression.etag))


class MemorySchedules:
    def __init__(self, t: Table) -> None:
        self._t = t

    def create(self, schedule: StoredSchedule) -> StoredSchedule:
        return StoredSchedule.model_validate(self._t.create(schedule.doc()))

    def get(self, schedule_id: str) -> StoredSchedule:
        return StoredSchedule.model_validate(self._t.read(schedule_id, schedule_id))

    def replace(self, schedule: StoredSchedule) -> StoredSchedule:
        return StoredSchedule.model_validate(self._t.replace(schedule.doc(), schedule.etag))

    def delete(self, schedule_id: str) -> None:
        self._t.delete(schedule_id, schedule_id)

    def all(self) -> list[StoredSchedule]:
        return readable_schedules(self._t.query(lambda d: True))


class MemoryActivities:
    def __init__(self, t: Table) -> None:
        self._t = t

    def create(self, seen: SeenActivity) -> bool:
        return self._t.create_once(seen.model_dump(mode="json"))


class MemoryAgents:
    def __init__(self, t: Table) -> None:
        self._t = t

    def get(self, agent_id: str) -> AgentRecord:
        return AgentRecord.model_validate(self._t.read(agent_id, agent_id))

    def create(self, record: AgentRecord) -> AgentRecord:
        return AgentRecord.model_validate(self._t.create(record.doc()))

    def replace(self, record: AgentRecord) -> AgentRecord:
        return AgentRecord.model_validate(self._t.replace(record.doc(), record.etag))

    def all(self, pool: str | None = None) -> list[AgentRecord]:
        docs = self._t.query(lambda d: pool is None or d.get("pool") == pool)
        return [AgentRecord.model_validate(d) for d in docs]


class MemoryTicks:
    def __init__(self, t: Table) -> None:
        self._t = t

    def get(self, name: str) -> int | None:
        try:
            return TimerTick.model_validate(self._t.read(name, name)).at_ms
        except NotFound:
            return None

    def put(self, name: str, at_ms: int) -> None:
        self._t.upsert(TimerTick(id=name, at_ms=at_ms).model_dump(mode="json"))


class MemoryLive:
    def __init__(self, t: Table) -> None:
        self._t = t

    def get(self, run_id: str, item_id: str) -> LiveDoc:
        return LiveDoc.model_validate(self._t.read(item_id, run_id))

    def put(self, doc: LiveDoc) -> LiveDoc:
        return LiveDoc.model_validate(self._t.upsert(doc.doc()))

    def of_run(self, run_id: str) -> list[LiveDoc]:
        docs = sorted(self._t.query(lambda d: d.get("run_id") == run_id, pk=run_id), key=_id)
        return [LiveDoc.model_validate(d) for d in docs]


# Containers and partition keys as adapters/cosmos CONTAINERS.
CONTAINERS: dict[str, str] = {
    "runs": "id",
    "items": "run_id",
    "results": "run_id",
    "aggregates": "run_id",
    "series": "series_key",
    "regressions": "series_key",
    "schedules": "id",
    "targets": "id",
    "activities": "id",
    "agents": "id",
    "ticks": "id",
    "live": "run_id",
}


class MemoryStore(Store):
    """The repositories over one set of tables; ``tables`` holds the clock, the fault hook
    and the writes a paused server holds back."""

    def __init__(self, clock: Callable[[], float], faults: Faults | None = None) -> None:
        self.tables = Tables(clock, faults)
        t = {
            name: Table(self.tables, name, pk, timestamps=name == "runs")
            for name, pk in CONTAINERS.items()
        }
        self.table = t
        super().__init__(
            runs=MemoryRuns(t["runs"]),
            items=MemoryItems(t["items"]),
            targets=MemoryTargets(t["targets"]),
            results=MemoryResults(t["results"], t["aggregates"]),
            series=MemorySeries(t["series"], t["regressions"]),
            schedules=MemorySchedules(t["schedules"]),
            activities=MemoryActivities(t["activities"]),
            agents=MemoryAgents(t["agents"]),
            ticks=MemoryTicks(t["ticks"]),
            live=MemoryLive(t["live"]),
        )

    def ping(self) -> None:
        if self.tables.effect("ping", "database", "") != "ok":
            raise StoreUnavailable("Cosmos DB: database: no answer (simulated)", "Cosmos DB")
