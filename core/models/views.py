"""What callers see of a run, its steps and items (core.runs.views builds them): the stored
documents without what is internal (ETags, message ids, principals) and what is large
(histogram bins stay in the full result, core.models.FullResult).

Fields the views have always left out rather than shown as null (a run's ``delivery`` when
it is not in trouble, its ``trace_id`` without a trace, ``queue_position`` unless it
waits) are omitted from the JSON when None.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from core.models.aggregate import StepAggregate, omitted
from core.models.common import RUN_ID_PATTERN
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


class RunSummary(View):
    """A run as lists, its cancellation and its submission show it: the run without its
    steps and items."""

    id: str
    state: RunState
    created_at: str
    updated_at: str | None
    target: str
    targets: list[str]
    pool: str
    tags: dict[str, str]
    request: RunRequest = Field(description="the request as validated, defaults filled in")
    items_total: int
    engine: str
    profile: str | None
    profile_version: int | None
    workload: Workload = Field(description="the resolved workload (profile + overrides)")
    comparison_key: str
    fill: bool
    step_count: int
    error: str | None
    cancel_requested: bool
    requested_by: Requester
    provisioning: Provisioning | None = Field(
        description="state provisioning: its elastic pool is growing; who is missing"
    )
    gate: RunGate | None = Field(
        description="the regression gate's verdict, per step and metric, with the figures "
        "behind it (the docs, Pipelines); set when the run is finalized"
    )
    delivery: Delivery | None = omitted(description="while its delivery is pending or failed")
    trace_id: str | None = omitted(
        pattern=r"^[0-9a-f]{32}$",
        description="the run's OpenTelemetry trace (Application Insights' operation id), "
        "when the service records traces",
    )
    counts: dict[ItemState, int] | None = omitted(
        description="its items by state (in a run's own view, not in lists)"
    )
    queue_position: int | None = omitted(description="its place in line, while it waits")


class RunView(RunSummary):
    """A run as GET /api/runs/{id} shows it: the run, its steps with their aggregates, its
    items with their results' summaries, and its last step's aggregate."""

    usage: Usage
    steps: list[StepView]
    items: list[ItemView]
    aggregate: StepAggregate | None = Field(description="the last step's")


class RunList(View):
    runs: list[RunSummary] = Field(description="newest first")
    continuation: str | None = Field(description="pass back for the next page; null: no more")


class RunAccepted(View):
    id: str = Field(pattern=RUN_ID_PATTERN)
    state: RunState
    location: str = Field(description="the run's URL path, also in the Location header")
    queue_position: int | None = omitted(description="only while waiting for the target")
