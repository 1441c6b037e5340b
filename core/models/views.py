"""What callers see of a run, its steps and items (core.runs.views builds them): the stored
documents without what is internal (ETags, message ids, principals) and what is large
(histogram bins stay in the full result, core.models.FullResult).

Fields the views have always left out rather than shown as null (a run's ``delivery`` when
it is not in trouble, its ``trace_id`` without a trace, ``queue_position`` unless it
waits) are omitted from the JSON when None.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.models.aggregate import StepAggregate, omitted
from core.models.gate import RunGate
from core.models.request import RunRequest
from core.models.result import ResultSummary
from core.models.state import ItemState, RunState
from core.models.stored import Delivery, ItemError, Provisioning, Rebarrier, Requester
from core.models.workload import Workload


class View(BaseModel):
    model_config = ConfigDict(frozen=True)


class Usage(View):
    """Client VM time the run held (claim to end of each item), and its cost."""

    agent_s: float
    items: int
    price_per_hour: float | None
    cost: float | None


class StepView(View):
    step: int
    clients: int
    mode: str
    point: str
    repetition: int
    discarded: bool
    workload: Workload | None
    start_at_ms: int | None
    failed_reason: str | None
    aggregate: StepAggregate | None = Field(description="once the run is finalized")


class ItemView(View):
    id: str
    step: int
    client: int
    state: ItemState
    agent_id: str | None
    attempts: int
    errors: list[ItemError]
    reason: str | None
    claimed_at: str | None
    ready_at: str | None
    started_at: str | None
    ended_at: str | None
    start_at_ms: int | None = Field(
        description="an instant of its own, when it heard its step's too late"
    )
    rebarriered: Rebarrier | None
    result: ResultSummary | None


class RunView(View):
    """A run as GET /api/runs/{id} shows it: the run, its steps with their aggregates, its
    items with their results' summaries, and its last step's aggregate."""

    id: str
    state: RunState
    created_at: str
    updated_at: str | None
    target: str
    targets: list[str]
    pool: str
    tags: dict[str, str]
    request: RunRequest
    items_total: int
    engine: str
    profile: str | None
    profile_version: int | None
    workload: Workload
    comparison_key: str
    fill: bool
    step_count: int
    error: str | None
    cancel_requested: bool
    requested_by: Requester
    provisioning: Provisioning | None
    gate: RunGate | None
    delivery: Delivery | None = omitted(description="while its delivery is pending or failed")
    trace_id: str | None = omitted()
    counts: dict[ItemState, int] | None = omitted(description="its items by state")
    queue_position: int | None = omitted(description="its place in line, while it waits")
    usage: Usage
    steps: list[StepView]
    items: list[ItemView]
    aggregate: StepAggregate | None = Field(description="the last step's")

    def doc(self) -> dict[str, Any]:
        """The view's JSON, as the API serves it."""
        return self.model_dump(mode="json")
