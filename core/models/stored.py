"""Runs, steps and work items as stored (pure). The store returns these models; every
change of state goes through their moves, along the edges of core.models.state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.models import DataSet, RunRequest, WorkItem, Workload
from core.models.document import StoredJson
from core.models.gate import RunGate
from core.models.state import (
    DELIVERY_MOVES,
    HELD,
    INTERNAL_ERROR_ATTEMPTS,
    ITEM_MOVES,
    RUN_MOVES,
    STEP_MOVES,
    TERMINAL,
    DeliveryState,
    IllegalMove,
    ItemState,
    RunState,
    StepState,
)
from core.models.target_facts import RunTargetFacts


class _Stored(BaseModel):
    """A document as stored: older documents may lack newer fields (defaults) or carry
    fields no longer used (ignored); the ETag is kept for compare-and-swap."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    etag: str | None = Field(None, alias="_etag", exclude=True)

    def doc(self) -> StoredJson:
        return self.model_dump(mode="json")


class ItemError(BaseModel):
    model_config = ConfigDict(extra="ignore")
    at: str
    agent_id: str
    message: str
    report_id: str | None = None
    final: bool | None = None


class Rebarrier(BaseModel):
    """Why an item got a start instant of its own: it heard its step's "go" too late."""

    model_config = ConfigDict(extra="ignore")
    at_ms: int
    step_start_at_ms: int
    late_ms: int
    start_at_ms: int


class Item(_Stored):
    id: str
    run_id: str
    kind: Literal["item"] = "item"
    step: int
    client: int
    state: ItemState = ItemState.QUEUED
    agent_id: str | None = None
    principal: str | None = None  # what the holder's credential proved
    message_id: str | None = None
    attempts: int = 0
    errors: list[ItemError] = Field(default_factory=list)
    reason: str | None = None
    claimed_at: str | None = None
    heartbeat_at: str | None = None
    ready_at: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    start_at_ms: int | None = None  # an instant of its own (see Rebarrier)
    rtt_ms: int | None = None  # its agent's round trip, as it reported ready
    rebarriered: Rebarrier | None = None
    # Its run was cancelled while an agent held it: the holder's next heartbeat, which
    # reads only its item, tells it to stop (core.runs.agent_reports).
    cancel_requested: bool = False
    work_item: WorkItem

    def move(self, to: ItemState, **changes: Any) -> None:
        if to not in ITEM_MOVES[self.state]:
            raise IllegalMove(f"item {self.id}: {self.state} -> {to}")
        self.state = to
        for key, value in changes.items():
            setattr(self, key, value)
        # ``ended_at``: stamped by the write that stores the move, from the service's clock
        # (core.runs.lifecycle.Lifecycle.update_item).

    def end(self, to: ItemState, reason: str) -> bool:
        """Fail or cancel the item unless it has ended already; True when it moved."""
        if self.state in TERMINAL:
            return False
        self.move(to, reason=reason)
        return True

    def cancel(self) -> bool:
        """Its run was cancelled: a queued item ends now; a held one is marked, for its
        holder to hear at its next heartbeat. True when it changed."""
        if self.state == ItemState.QUEUED:
            return self.end(ItemState.CANCELLED, "run cancelled")
        if self.held and not self.cancel_requested:
            self.cancel_requested = True
            return True
        return False

    @property
    def held(self) -> bool:
        return self.state in HELD

    @property
    def ended(self) -> bool:
        return self.state in TERMINAL


class Step(_Stored):
    """One measured step of a run, and its start barrier."""

    id: str
    run_id: str
    kind: Literal["step"] = "step"
    step: int
    clients: int
    mode: str = "measure"
    point: str = ""
    repetition: int = 0
    discarded: bool = False
    ref_step: int | None = None  # rate-curve and target_iops steps size from this step
    rate_pct: int | None = None
    target_iops: int | None = None
    workload: Workload | None = None  # None until a dynamic step is resolved
    enqueued: bool = False
    first_claim_ms: int | None = None
    deadline_ms: int | None = None
    start_at_ms: int | None = None  # the common start instant
    # When it was set (the API's clock): a "go" carries it, and an agent waiting in held
    # calls times how long its "go" took to come from then (agent.api_client).
    start_set_ms: int | None = None
    failed_reason: str | None = None
    # The barrier's progress (core.models.barrier_shard): its round (a lone client's retry
    # begins another), and the shards seen complete, each written once by the ready report
    # that completed it; the clients' own facts are on their items.
    barrier_round: int = 0
    ready_shards: list[int] = Field(default_factory=list)
    # When the step's sender took or last renewed its send lease (core.runs.sender): another
    # caller leaves the send to it until the lease has passed (core.runs.sending).
    sending_ms: int | None = None
    # The clients whose messages its sender had not got out, as recorded at its last
    # renewal or when it failed: the next sender sends only these (None: send every item,
    # creating them first).
    unsent: list[int] | None = None

    @property
    def state(self) -> StepState:
        if self.failed_reason:
            return StepState.FAILED
        if self.start_at_ms is not None:
            return StepState.STARTED
        return StepState.OPEN if self.enqueued else StepState.PLANNED

    def _check(self, to: StepState) -> None:
        if to not in STEP_MOVES[self.state]:
            raise IllegalMove(f"step {self.id}: {self.state} -> {to}")

    def mark_sent(self) -> None:
        """Its items are on the queue. A step failed or started meanwhile stays so."""
        if self.state == StepState.PLANNED:
            self._check(StepState.OPEN)
        self.enqueued = True
        self.unsent = None

    def claimed(self, at_ms: int, timeout_ms: int) -> None:
        """One of its items was claimed: the first claim starts the barrier's deadline (a
        client claimed again reports ready again: core.runs.barrier.leave)."""
        if self.first_claim_ms is None:
            self.first_claim_ms, self.deadline_ms = at_ms, at_ms + timeout_ms

    def start(self, at_ms: int, *, set_ms: int | None = None) -> None:
        """Every client is ready: the common start instant, set at ``set_ms``."""
        self._check(StepState.STARTED)
        self.start_at_ms, self.start_set_ms = at_ms, set_ms

    def reopen(self) -> None:
        """A lone client retried after its start: a fresh barrier (nobody ready, no instant),
        its deadline from its next claim (none until then: a deadline left behind would
        expire a barrier nobody claimed, issue 24.1)."""
        self._check(StepState.OPEN if self.enqueued else StepState.PLANNED)
        self.start_at_ms, self.first_claim_ms, self.deadline_ms = None, None, None
        self.start_set_ms = None
        self.barrier_round += 1  # every shard of the round before is left behind
        self.ready_shards = []

    def move_start(self, at_ms: int) -> None:
        """A lone client heard "go" too late: the step's instant moves with it."""
        if self.state != StepState.STARTED:
            raise IllegalMove(f"step {self.id}: {self.state}, no start instant to move")
        self.start_at_ms, self.start_set_ms = at_ms, None  # not the instant set then

    def fail(self, reason: str) -> bool:
        """A barrier that never completed; True when this call failed it (False when it has
        started or failed already)."""
        if self.state in (StepState.STARTED, StepState.FAILED):
            return False
        self._check(StepState.FAILED)
        self.failed_reason = reason
        return True


class Requester(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str
    role: str
    door: str = "api"


class Delivery(BaseModel):
    """The run's outbox: ``state`` is its first step's (sent once the run is admitted);
    ``attempts``, ``last_error`` and ``deadline_ms`` record the failed sends of whichever
    step is being sent (cleared when it goes out): the timer sends it again until
    ``deadline_ms``, then the step and the run fail (core.runs.delivery)."""

    model_config = ConfigDict(extra="ignore")
    state: DeliveryState = DeliveryState.WAITING
    attempts: int = 0
    last_error: str | None = None
    deadline_ms: int | None = None

    def move(self, to: DeliveryState) -> None:
        if to != self.state and to not in DELIVERY_MOVES[self.state]:
            raise IllegalMove(f"delivery: {self.state} -> {to}")
        self.state = to


class Provisioning(BaseModel):
    """A step held back while its elastic pool grows."""

    model_config = ConfigDict(extra="ignore")
    since_ms: int
    step: int
    needed: int
    live: int
    missing: int
    reason: str


class Run(_Stored):
    id: str
    created_at: str
    created_ms: int
    updated_at: str | None = None
    request: RunRequest
    engine: Literal["fio", "diskspd"] = "fio"
    profile: str | None = None
    profile_version: int | None = None
    workload: Workload
    comparison_key: str
    fill: bool = False
    files_per_target: int = 1
    cooldown_s: int = 0
    target: str
    targets: list[str]
    pool: str
    tags: dict[str, str] = Field(default_factory=dict)
    step_count: int
    items_total: int
    state: RunState = RunState.QUEUED
    admitted: bool = True
    delivery: Delivery = Field(default_factory=Delivery)
    requested_by: Requester
    body_hash: str
    idempotency_key: str | None = None
    cancel_requested: bool = False
    finished: bool = False  # no item will run any more
    finalized: bool = False  # aggregates stored, monitor told
    finalizing_ms: int | None = None  # its finalizer's lease, from then (core.runs.finalizing)
    error: str | None = None
    due_ms: int | None = None  # when the timer must look at it (None: nothing due)
    # Ticks of the timer that failed on this run with an unexpected error (core.runs.timer);
    # at INTERNAL_ERROR_ATTEMPTS the run fails alone, "internal error: ...".
    internal_errors: int = 0
    # The commit point (core.runs.commit): the creation counts only if the database stored
    # it by this second (its ``_ts``); ``landed_s`` keeps that first ``_ts``; ``accepted``
    # is the decision (None: not decided yet; False: void, it never runs).
    accept_by_s: int | None = None
    landed_s: int | None = None
    accepted: bool | None = None
    # Revivals of a void run under its Idempotency-Key so far (core.runs.intake): the
    # target locks it takes carry it (core.runs.admission), so the cleanup of one attempt
    # never frees the locks a later attempt of the same run took over.
    generation: int = 0
    # The request that wrote this attempt (a random id): a request whose write got no answer
    # voids its own attempt if it landed, never a twin's of the same generation.
    attempt: str | None = None
    ts: int | None = Field(None, alias="_ts", exclude=True)  # the database's, as read
    provisioning: Provisioning | None = None  # while its pool grows (state provisioning)
    # What the run was judged with (core.limits.facts.run_target_facts): kept with the run,
    # so a later change of the registry or the catalogue does not rewrite its explanation.
    target_facts: RunTargetFacts | None = None
    # The prepared files of its read-only targets (core.runs.guardrails.datasets_for),
    # carried by every work item to the agents.
    datasets: dict[str, DataSet] = Field(default_factory=dict)
    # The regression gate's verdict (core.analysis.gate), set when the run is finalized.
    gate: RunGate | None = None
    # The W3C trace context of its intake: every later span of the run joins that trace
    # (core.telemetry).
    traceparent: str | None = None

    def move(self, to: RunState) -> None:
        if to != self.state and to not in RUN_MOVES[self.state]:
            raise IllegalMove(f"run {self.id}: {self.state} -> {to}")
        self.state = to

    @property
    def owner(self) -> str:
        return self.requested_by.name

    @property
    def void(self) -> bool:
        """Its creation does not count (core.runs.commit): it never runs."""
        return self.accepted is False

    @property
    def gave_up(self) -> bool:
        """The timer failed it for an internal error: it owes no aggregate, nothing more."""
        return self.internal_errors >= INTERNAL_ERROR_ATTEMPTS


def derive_run_state(
    items: list[Item], *, cancel_requested: bool, finalized: bool, finished: bool, admitted: bool
) -> RunState:
    """``finished``: no item will run any more (every step ran or one failed at its
    barrier). A run is completed only once its aggregates are stored (``finalized``); a
    finished run with a failed client reads as failed at once."""
    if cancel_requested:
        return RunState.CANCELLED
    if not admitted:
        return RunState.WAITING
    if finished and any(i.state == ItemState.FAILED for i in items):
        return RunState.FAILED
    if finalized:
        return RunState.COMPLETED
    if any(i.state != ItemState.QUEUED for i in items):
        return RunState.RUNNING
    return RunState.QUEUED


def steps_and_items(docs: Iterable[StoredJson]) -> tuple[list[Step], list[Item]]:
    """A run's steps and items from its documents in the items container (its barrier
    shards and claim marks, kept there too, are neither). An item stored before kinds were
    written has none."""
    listed = list(docs)
    steps = [Step.model_validate(d) for d in listed if d.get("kind") == "step"]
    items = [Item.model_validate(d) for d in listed if d.get("kind", "item") == "item"]
    return steps, items
