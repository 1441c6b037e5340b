"""A step's aggregate: its clients' figures summed over their common window
(core.analysis.aggregate), what bound it (core.analysis.ceilings), as stored (one document
per step, id ``<run>.s<step>``) and served.

Fields that the documents leave out rather than store as null (``note``, a direction that
did not run, total latency where none was recorded, ...) are omitted from the JSON when
None, so the stored and served JSON is the one the hand-built documents had. Stored
documents are read leniently (fields no longer written are ignored), like core.models.stored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.models.document import StoredJson
from core.models.result import Direction
from core.models.workload import Workload

Basis = Literal["common-window", "whole-run"]
CeilingKind = Literal["target", "client-network", "client-cpu", "vm-disk"]
CeilingMetric = Literal["bw_bytes", "iops", "cpu_pct"]
CeilingDirection = Literal["read", "write", "total"]
# What the per-second series of a step holds for each second: t_ms, iops, bw_bytes.
SecondRow = dict[str, float]


def _none(value: object) -> bool:
    return value is None


def omitted(**kw: Any) -> Any:
    """A field the JSON leaves out when it is None."""
    return Field(None, exclude_if=_none, **kw)


class Part(BaseModel):
    """A part of a stored aggregate: names with a dot (``p99.9``) are aliases."""

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class AggregateWindow(Part):
    """The common window: from the latest client start to the earliest client end."""

    start_ms: int
    end_ms: int
    seconds: float


class FailedClientRow(Part):
    client: int
    agent_id: str | None
    error: str


class PercentileSummary(Part):
    """Latency percentiles in ns; ``max`` (the highest bucket) only where read from bins."""

    p50: float
    p90: float
    p99: float
    p99_9: float = Field(alias="p99.9")
    p99_99: float = Field(alias="p99.99")
    max: float | None = omitted()


class DirectionAggregate(Part):
    """One direction of a step, summed over its clients (ns, bytes, per second)."""

    iops: float
    bw_bytes: float
    window_ios: float | None = omitted(description="I/Os inside the common window")
    clat_ns: PercentileSummary
    percentiles_basis: Basis
    total_ios: int
    percentiles_exact: bool
    lat_mean_ns: float
    clat_mean_ns: float
    slat_mean_ns: float | None
    lat_ns: PercentileSummary | None = omitted(description="total latency, where recorded")
    lat_percentiles_basis: Basis | None = omitted()
    lat_percentiles_exact: bool | None = omitted()


class ClientLatency(Part):
    p50: float
    p99: float


class ClientFigures(Part):
    """One client's part of a step, inside the common window when there is one."""

    client: int
    agent_id: str | None
    iops: float
    bw_bytes: float
    lat_ns: dict[Direction, ClientLatency]
    clat_ns: dict[Direction, ClientLatency]
    share: float
    # Whole milliseconds when measured against the step's instant: kept as they came.
    start_skew_ms: int | float | None


class Spread(Part):
    min: float
    max: float
    cv: float


class RateCapCheck(Part):
    """Little's law for rate-capped clients: did they get the load they were capped at?"""

    mode: Literal["rate-cap"]
    cap_iops: float
    achieved_iops: float
    ratio: float
    flagged: bool


class OutstandingCheck(Part):
    """Little's law: measured IOPS x mean latency against the I/Os the clients kept in flight."""

    mode: Literal["outstanding"]
    outstanding_ios: float
    implied_ios: float
    ratio: float
    flagged: bool


LittlesLaw = Annotated[RateCapCheck | OutstandingCheck, Field(discriminator="mode")]


class SkewRange(Part):
    max: int | float
    min: int | float


class CeilingRow(Part):
    """One limit that applies to a step and how near the step came to it."""

    kind: CeilingKind
    name: str
    metric: CeilingMetric
    direction: CeilingDirection
    limit: float
    measured: float
    utilisation: float
    applies: bool
    reached_at: float
    rule: str
    source: dict[str, str] | None


class BoundBy(Part):
    """The limit the step reached, else kind ``none`` naming the nearest."""

    kind: CeilingKind | Literal["none"]
    name: str
    limit: float | None
    measured: float | None
    utilisation: float | None


class Knee(Part):
    """Where a rate curve's p99 rose before any known limit was reached."""

    p99_ns: float
    previous_p99_ns: float
    ratio: float
    previous_step: int
    latency: str
    note: str


class SeriesArtifact(Part):
    """The step's per-second series, kept in Blob Storage (it can outgrow a document)."""

    bytes: int
    sha256: str


class StepFigures(Part):
    """The figures of one step (core.analysis.aggregate.aggregate)."""

    clients: int
    clients_expected: int
    partial: bool
    failed_clients: list[FailedClientRow]
    basis: Basis
    window: AggregateWindow | None
    series: dict[Direction, list[SecondRow]] | None = omitted(
        description="the clients' summed IOPS and bytes in each second of the window"
    )
    note: str | None = omitted()
    read: DirectionAggregate | None = omitted()
    write: DirectionAggregate | None = omitted()
    per_client: list[ClientFigures]
    spread: Spread | None
    scaling_efficiency: float | None
    littles_law: LittlesLaw | None
    start_skew_ms: SkewRange | None

    def directions(self) -> list[DirectionAggregate]:
        """The directions that ran, read first."""
        return [a for a in (self.read, self.write) if a is not None]

    @property
    def total_iops(self) -> float:
        return float(sum(a.iops for a in self.directions()))

    @property
    def mean_latency_s(self) -> float:
        """The I/O-weighted mean total latency of the step, in seconds."""
        dirs = self.directions()
        ios = sum(a.total_ios for a in dirs)
        if not ios:
            return 0.0
        return float(sum(a.lat_mean_ns * a.total_ios for a in dirs) / ios / 1e9)


class StepIdentity(Part):
    """Which step of which run an aggregate is, and what it ran."""

    id: str
    run_id: str
    step: int
    target: str
    created_at: str
    mode: str
    point: str
    repetition: int
    discarded: bool
    workload: Workload
    like_key: str = Field(description="steps with the same key ran the same workload")
    comparison_key: str = Field(description="what makes it comparable with another run's")


class StepAggregate(StepFigures, StepIdentity):
    """One step's aggregate as stored and served: identity, figures, then its limits."""

    ceilings: list[CeilingRow]
    bound_by: BoundBy
    knee: Knee | None = omitted()
    series_artifact: SeriesArtifact | None = omitted()

    def doc(self) -> StoredJson:
        """The stored document's JSON (the aggregates container's edge)."""
        return self.model_dump(mode="json")
