"""What the core needs from the outside world. The adapters implement these protocols, one
small repository per Cosmos DB container; the core never imports an Azure SDK.

Errors: ``NotFound`` for a missing document, ``Conflict`` for an id that exists or an ETag
that changed (compare-and-swap), ``StoreUnavailable`` when the service cannot be reached,
``TooLarge`` for a document over the service's size limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from core.models import Result, StepAggregate, StoredResult, WorkItem
from core.models.activity import SeenActivity
from core.models.agents import AgentRecord
from core.models.barrier_shard import BarrierShard, ClaimMark
from core.models.cards import TeamsMessage
from core.models.chat import RunFinished
from core.models.live import LiveDoc
from core.models.locks import TargetLock
from core.models.regression import DeliveryRecord, Regression
from core.models.schedule import StoredSchedule
from core.models.series import PointFacts, StepPoint
from core.models.stored import Item, Run, Step

# What RunRepo.page hands out as its continuation token: URL-safe Base64. page raises
# ValidationFailed (field continuation) for anything else, NotFound for a token of this
# form it did not give.
CONTINUATION_PATTERN = r"^[A-Za-z0-9_-]+={0,2}$"


class RunRepo(Protocol):
    def create(self, run: Run) -> Run: ...
    def get(self, run_id: str) -> Run: ...
    def replace(self, run: Run) -> Run: ...  # if-match run.etag
    def page(
        self,
        *,
        target: str | None,
        state: str | None,
        tag: tuple[str, str] | None,
        limit: int,
        continuation: str | None,
    ) -> tuple[list[Run], str | None]: ...
    def due(self, now_ms: int) -> list[Run]: ...  # runs whose due_ms has come
    def active(self, pool: str) -> list[Run]: ...  # admitted to the pool, not finished


class ItemRepo(Protocol):
    """A run's steps and items, one logical partition per run."""

    def create_step(self, step: Step) -> Step: ...
    def create_item(self, item: Item) -> Item: ...
    # Each created, several at once where the store allows; one there already is left as
    # it is (a replay); once all were tried, the first other error is raised.
    def create_items(self, items: Sequence[Item]) -> None: ...
    def get_step(self, run_id: str, step: int) -> Step: ...
    def get_item(self, run_id: str, item_id: str) -> Item: ...
    def replace_step(self, step: Step) -> Step: ...
    def replace_item(self, item: Item) -> Item: ...
    def of_run(self, run_id: str) -> tuple[list[Step], list[Item]]: ...
    def overdue_barriers(self, now_ms: int) -> list[Step]: ...  # deadline passed, not started
    def open_items(self, run_id: str, step: int) -> int: ...  # the step's items not ended
    # The item of a step an agent claimed last (core.models.barrier_shard.ClaimMark).
    def get_claim_mark(self, run_id: str, mark_id: str) -> ClaimMark: ...
    def put_claim_mark(self, mark: ClaimMark) -> None: ...  # an upsert: its agent's alone
    # The start barrier's shards (core.models.barrier_shard), in the run's partition.
    def get_shard(self, run_id: str, shard_id: str) -> BarrierShard: ...
    # Those of ``shard_ids`` there, by id (a missing one is left out), read at once.
    def get_shards(self, run_id: str, shard_ids: Sequence[str]) -> dict[str, BarrierShard]: ...
    def create_shard(self, shard: BarrierShard) -> BarrierShard: ...
    def replace_shard(self, shard: BarrierShard) -> BarrierShard: ...


class LiveRepo(Protocol):
    """Items' live samples while they run (core.runs.live), one document per item, one
    logical partition per run."""

    def get(self, run_id: str, item_id: str) -> LiveDoc: ...
    def put(self, doc: LiveDoc) -> LiveDoc: ...  # an upsert: its holder is its one writer
    def of_run(self, run_id: str) -> list[LiveDoc]: ...


class TargetRepo(Protocol):
    def get(self, key: str) -> TargetLock: ...
    def create(self, lock: TargetLock) -> TargetLock: ...
    def replace(self, lock: TargetLock) -> TargetLock: ...
    def with_waiters(self) -> list[TargetLock]: ...  # without their queues


class ResultRepo(Protocol):
    """Client results (the ``Result`` contract as stored) and step aggregates."""

    def create(self, result: Result) -> bool: ...  # False when it existed already
    def get(self, run_id: str, item_id: str) -> StoredResult: ...
    def of_run(self, run_id: str) -> list[StoredResult]: ...
    def create_aggregate(self, aggregate: StepAggregate) -> bool: ...
    def list_aggregates(self, run_id: str) -> list[StepAggregate]: ...


class SeriesRepo(Protocol):
    """Series points and their regressions, one logical partition per series."""

    def create_point(self, point: StepPoint) -> bool: ...  # False when it existed already
    def points(self, series_key: str) -> list[StepPoint]: ...
    def all_points(self) -> list[PointFacts]: ...  # the fields needed to list series
    def create_regression(self, regression: Regression) -> bool: ...  # False: existed
    def regressions(self, series_key: str | None = None) -> list[Regression]: ...
    def get_regression(self, series_key: str, regression_id: str) -> Regression: ...
    def replace_regression(self, regression: Regression) -> Regression: ...  # if-match etag


class ScheduleRepo(Protocol):
    def create(self, schedule: StoredSchedule) -> StoredSchedule: ...
    def get(self, schedule_id: str) -> StoredSchedule: ...
    def replace(self, schedule: StoredSchedule) -> StoredSchedule: ...  # if-match etag
    def delete(self, schedule_id: str) -> None: ...
    def all(self) -> list[StoredSchedule]: ...


class ActivityRepo(Protocol):
    def create(self, seen: SeenActivity) -> bool: ...  # False when already seen


class AgentRepo(Protocol):
    """The agent registry, one document per agent id."""

    def get(self, agent_id: str) -> AgentRecord: ...
    def create(self, record: AgentRecord) -> AgentRecord: ...
    def replace(self, record: AgentRecord) -> AgentRecord: ...  # if-match record.etag
    def all(self, pool: str | None = None) -> list[AgentRecord]: ...


class TickRepo(Protocol):
    """When each timer (``runs``, ``schedules``) last completed a tick, in ms since the epoch:
    one document per timer, which every API instance's ``/api/health`` reads."""

    def get(self, name: str) -> int | None: ...  # None: never recorded
    def put(self, name: str, at_ms: int) -> None: ...  # last writer wins


@dataclass
class Store:
    """The repositories, one per container."""

    runs: RunRepo
    items: ItemRepo
    targets: TargetRepo
    results: ResultRepo
    series: SeriesRepo
    schedules: ScheduleRepo
    activities: ActivityRepo
    agents: AgentRepo
    ticks: TickRepo
    live: LiveRepo


class Artifacts(Protocol):
    """Large outputs in Blob Storage, addressed by run, owner (an item or a step) and name.
    Contents are stored exactly as given (the caller compresses)."""

    def put(self, run_id: str, owner: str, name: str, data: bytes) -> None: ...
    # Stores it unless the blob exists: False when it did (nothing written).
    def create(self, run_id: str, owner: str, name: str, data: bytes) -> bool: ...
    def get(self, run_id: str, owner: str, name: str) -> bytes: ...  # raises NotFound
    def size(self, run_id: str, owner: str, name: str) -> int: ...  # raises NotFound


class Queue(Protocol):
    """The service's side of the pools' work queues (Azure Storage queues)."""

    def send(self, item: WorkItem) -> None: ...  # BenchError over the 64 KiB message limit
    # Every item, perhaps several at once; once all were tried, PartialSend naming the
    # items whose send failed (the others went); BenchError for an item over the limit
    # before any is sent.
    def send_all(self, items: Sequence[WorkItem]) -> None: ...
    def send_poison(self, pool: str, body: str) -> None: ...
    def send_clean(self, pool: str, body: str) -> None: ...  # core.runs.clean's order


@dataclass(frozen=True)
class Message:
    """A received queue message: ``pop_receipt`` proves the receiver still holds it."""

    id: str
    pop_receipt: str
    dequeue_count: int
    content: str


class AgentQueue(Protocol):
    """The agents' side: a received message is invisible to others for the visibility
    timeout, then delivered again with its dequeue count one higher; renewing or deleting
    it needs its newest pop receipt (``LeaseLost`` otherwise)."""

    def receive(self, pool: str, visibility_timeout: int) -> Message | None: ...
    def renew(self, pool: str, message: Message, visibility_timeout: int) -> Message: ...
    def delete(self, pool: str, message: Message) -> None: ...


class Notifier(Protocol):
    """Tells people about a regression found for the first time; never raises."""

    def notify(self, regression: Regression) -> list[DeliveryRecord]: ...
    def post_result(
        self, door: str, teams_message: TeamsMessage, payload: RunFinished
    ) -> list[DeliveryRecord]: ...


class NoNotifier:
    def notify(self, regression: Regression) -> list[DeliveryRecord]:
        return []

    def post_result(
        self, door: str, teams_message: TeamsMessage, payload: RunFinished
    ) -> list[DeliveryRecord]:
        return []
