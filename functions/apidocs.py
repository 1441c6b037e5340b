"""What the API answers, as models for its OpenAPI document.

The handlers return plain documents built by the core; these models describe them for
callers and fuzzers (functions/openapi.py turns them into the document's components), and
are never used to filter or re-validate a response. ``tests/test_openapi.py`` checks real
answers against them. Objects allow keys beyond those listed: the listed ones are promised.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.models import RUN_ID_PATTERN, Direction, Engine, Result, RunRequest, Workload
from core.models.gate import RunGate
from core.models.state import RunState
from core.runs.guardrails import DOORS

Door = Literal[DOORS]  # type: ignore[valid-type]
ItemState = Literal["queued", "claimed", "ready", "running", "completed", "failed", "cancelled"]


class OpenDoc(BaseModel):
    """An answer object that may carry more keys than it lists."""

    model_config = ConfigDict(extra="allow")


# ---- errors -------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    field: str = Field(
        description="dotted path of the field at fault (workload.bs, targets.1), a header or "
        "query name, or (body), (path), (auth), (caller), (request), (service)"
    )
    message: str


class ErrorBody(BaseModel):
    """Every 4xx and 5xx answer: each problem found, by field."""

    errors: list[ErrorDetail] = Field(min_length=1)


# ---- runs ---------------------------------------------------------------------------------


class TimerTick(BaseModel):
    last_tick_at: str | None = Field(description="its last complete tick (UTC), if any")
    age_s: float | None = Field(description="seconds since then")


class Health(BaseModel):
    status: Literal["ok", "degraded"]
    checks: dict[str, str] = Field(
        description='per backing service ("cosmos") and timer ("timer.runs", '
        '"timer.schedules"): "ok", the error, or why the timer is stale'
    )
    timers: dict[str, TimerTick] = Field(
        default_factory=dict, description="each timer's last complete tick (when Cosmos DB answers)"
    )


class RunAccepted(BaseModel):
    id: str = Field(pattern=RUN_ID_PATTERN)
    state: RunState
    location: str = Field(description="the run's URL path, also in the Location header")
    queue_position: int | None = Field(None, description="only while waiting for the target")


class RequestedBy(BaseModel):
    name: str
    role: str
    door: Door


class Provisioning(BaseModel):
    since_ms: int
    step: int
    needed: int = Field(description="agents the step needs live")
    live: int
    missing: int = Field(description="agents still to register")
    reason: str


class RunSummary(OpenDoc):
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
    engine: Engine
    profile: str | None
    profile_version: int | None
    workload: Workload = Field(description="the resolved workload (profile + overrides)")
    comparison_key: str
    fill: bool
    step_count: int
    counts: dict[str, int] | None = Field(
        None, description="work items per state (in a run's own view, not in lists)"
    )
    delivery: dict[str, Any] | None = Field(
        None,
        description="while the first step could not be sent yet (the queue was out of "
        "reach): state pending, attempts, last_error, deadline_ms; failed past it",
    )
    error: str | None
    cancel_requested: bool
    requested_by: RequestedBy
    provisioning: Provisioning | None = Field(
        None, description="state provisioning: its elastic pool is growing; who is missing"
    )
    gate: RunGate | None = Field(
        None,
        description="the regression gate's verdict, per step and metric, with the figures "
        "behind it (the docs, Pipelines); set when the run is finalized",
    )
    trace_id: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{32}$",
        description="the run's OpenTelemetry trace (Application Insights' operation id), "
        "when the service records traces",
    )


class RunList(BaseModel):
    runs: list[RunSummary] = Field(description="newest first")
    continuation: str | None = Field(description="pass back for the next page; null: no more")


class Percentiles(OpenDoc):
    p50: float | None
    p99: float | None
    p99_9: float | None = Field(alias="p99.9")


class DirectionSummary(OpenDoc):
    """A client's whole-run figures, fio's own. Latency in its three kinds (the docs, "Which
    latency"): total (``lat``, what the application waits), completion (``clat``),
    submission (``slat``)."""

    iops: float
    bw_bytes: float = Field(description="bytes per second")
    total_ios: int
    lat_mean_ns: float = Field(description="total latency's mean, ns")
    clat_mean_ns: float | None = Field(None, description="completion latency's mean, ns")
    slat_mean_ns: float | None = Field(
        None, description="submission latency's mean, ns; null where fio records none"
    )
    lat_ns: Percentiles | None = Field(
        None, description="total latency's percentiles, ns (null in results before it)"
    )
    clat_ns: Percentiles = Field(description="completion latency's percentiles, ns")


class ResultSummary(OpenDoc):
    """A client's result without fio's raw JSON (GET .../results/{item} has it all)."""

    agent_id: str | None = None
    engine_version: str | None = None
    started_at_ms: int | None = None
    ended_at_ms: int | None = None
    start: dict[str, Any] | None = Field(None, description="scheduled_ms, released_ms, skew_ms")
    host: dict[str, Any] | None = None
    mounts: list[dict[str, Any]] | None = None
    fill: dict[str, Any] | None = Field(
        None, description="whether the fill ran (ran: false = marker)"
    )
    steadystate: dict[str, Any] | None = Field(None, description="fio's steady-state verdict")
    read: DirectionSummary | None = None
    write: DirectionSummary | None = None


class ItemError(OpenDoc):
    at: str
    agent_id: str
    message: str


class ItemView(OpenDoc):
    id: str
    step: int
    client: int
    state: ItemState
    agent_id: str | None
    attempts: int
    errors: list[ItemError]
    reason: str | None
    claimed_at: str | None = Field(None, description="when its agent took it (usage counts from)")
    ready_at: str | None = Field(
        None, description="when its agent had laid out its files and reported ready"
    )
    started_at: str | None
    ended_at: str | None
    result: ResultSummary | None


class AggregateDirection(OpenDoc):
    """All clients' figures of one direction (the docs, "Scale-out and aggregation"); latency
    in its kinds: total (``lat``, shown by default), completion (``clat``), submission."""

    iops: float
    bw_bytes: float
    total_ios: int
    lat_mean_ns: float = Field(description="total latency's mean, ns (I/O-weighted)")
    clat_mean_ns: float | None = Field(None, description="completion latency's mean, ns")
    slat_mean_ns: float | None = Field(
        None, description="submission latency's mean, ns; null where a client recorded none"
    )
    lat_ns: dict[str, float] | None = Field(
        None,
        description="total latency: p50, p90, p99, p99.9, p99.99 and max in ns (null for "
        "results recorded before total latency was)",
    )
    lat_percentiles_basis: Literal["common-window", "whole-run"] | None = None
    lat_percentiles_exact: bool | None = None
    clat_ns: dict[str, float] = Field(
        description="completion latency: p50, p90, p99, p99.9, p99.99 and max in ns"
    )
    percentiles_basis: Literal["common-window", "whole-run"] | None = Field(
        None, description="the I/Os clat_ns describes"
    )
    percentiles_exact: bool


class Aggregate(OpenDoc):
    """One step's aggregate over its clients (see the docs, "Scale-out and aggregation")."""

    clients: int
    clients_expected: int
    partial: bool
    failed_clients: list[dict[str, Any]]
    basis: Literal["common-window", "whole-run"]
    window: dict[str, float] | None = Field(description="start_ms, end_ms, seconds")
    read: AggregateDirection | None = None
    write: AggregateDirection | None = None
    per_client: list[dict[str, Any]]
    scaling_efficiency: float | None
    ceilings: list[dict[str, Any]] | None = Field(
        None,
        description="every limit that applies: kind, name, metric, direction, limit, measured, "
        'utilisation, applies, reached_at, rule, source (the docs, "What bound the run")',
    )
    bound_by: dict[str, Any] | None = Field(
        None,
        description="kind (target, client-network, client-cpu, vm-disk or none), name, limit, "
        "measured, utilisation: the limit reached (utilisation >= its reached_at: 0.9, an "
        "interface's line rate 0.85), or none with the nearest",
    )


class StepView(OpenDoc):
    step: int
    clients: int
    mode: str | None
    point: str | None
    repetition: int | None
    discarded: bool | None
    workload: Workload | None = Field(description="null until a dynamic step is sized")
    start_at_ms: int | None = Field(description="the common start instant, Unix ms")
    failed_reason: str | None
    aggregate: Aggregate | None


class RunUsage(BaseModel):
    agent_s: float = Field(description="client VM time held: each item's claim to its end")
    items: int = Field(description="items that were claimed")
    price_per_hour: float | None = Field(description="the pool's price per client VM and hour")
    cost: float | None = Field(description="agent_s at price_per_hour")


class RunView(RunSummary):
    queue_position: int | None = Field(None, description="only while waiting for the target")
    steps: list[StepView]
    items: list[ItemView]
    aggregate: Aggregate | None = Field(description="the last step's")
    usage: RunUsage


class LatencyPoint(OpenDoc):
    """One step of the latency-versus-IOPS curve, plus, per direction that did I/O,
    ``<dir>_lat_<p>_ns`` (total latency: p50, p99, p99.9, max, mean) and
    ``<dir>_clat_<p>_ns`` (completion latency: p50, p99)."""

    step: int
    point: str | None
    mode: str | None = Field(
        None, description="rate-max: a rate sweep's unthrottled step; rate: one of its points"
    )
    clients: int
    iops: float


class ScalePoint(OpenDoc):
    clients: int
    iops: float
    bw_bytes: float
    linear_iops: float
    efficiency: float | None


class RepetitionSpread(OpenDoc):
    clients: int
    point: str
    repetitions: int
    mean_iops: float
    min_iops: float
    max_iops: float
    cv: float


class Curves(BaseModel):
    run_id: str
    latency: list[LatencyPoint] = Field(description="one point per kept step, in step order")
    scaleout: list[ScalePoint]
    repetitions: list[RepetitionSpread]


# ---- a client's full result ---------------------------------------------------------------


class SecondRow(OpenDoc):
    t_ms: float = Field(description="end of the 1 s interval, Unix ms")
    iops: float
    bw_bytes: float


class FullResult(Result):
    """A stored result with what Blob Storage keeps beside it."""

    series: dict[Direction, list[SecondRow]] = Field(
        description="per second over the measured period (from the timeline artifact), or "
        "with ?window=common over the step's common window"
    )
    series_window: Literal["own", "common"] = Field(
        description="own: the client's measured period; common: its step's common window"
    )
    raw: dict[str, Any] | None = Field(description="the engine's own output, if uploaded")
    raw_removed: bool | None = Field(
        None, description="true: the engine's own output was deleted by retention (the docs)"
    )
