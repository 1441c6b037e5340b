"""A series' stored points (one per measured run step, core.monitoring.monitor) and the
views of a series served by GET /api/series and /api/series/{key}.

A series is every aggregate of the same benchmark (core.analysis.series.series_key); its
points are cut into segments by their infrastructure (``infra``, a digest of
``infra_facts``)."""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from core.models.document import JsonObject, StoredDoc
from core.models.gate import KeptVerdict
from core.models.regression import Regression

# Points recorded before latency metrics named their kind held completion latency as
# ``read.p99``: read as what they are (``read.clat.p99``).
SERIES_PERCENTILES = ("p50", "p99", "p99.9")
LEGACY_METRICS = {
    f"{d}.{p}": f"{d}.clat.{p}" for d in ("read", "write") for p in SERIES_PERCENTILES
}


def metric_name(metric: str) -> str:
    return LEGACY_METRICS.get(metric, metric)


class InfraFacts(BaseModel):
    """The facts that make two runs' infrastructure the same (core.analysis.series
    .infra_facts): (vm size, region) of every client, (alias, filesystem type, source,
    options that change throughput) of every mount, and (alias, fact, value) of each
    declared target switch. ``targets`` is absent, not null, when none is declared, so
    that earlier points keep their fingerprint."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    hosts: list[tuple[str | None, str | None]]
    mounts: list[tuple[str, str, str, str]]
    targets: list[tuple[str, str, JsonValue]] | None = None

    @model_serializer(mode="wrap")
    def _declared_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if out.get("targets") is None:
            out.pop("targets", None)
        return out


class StepPoint(StoredDoc):
    """One measured step of one run in its series (container ``series``, partition
    ``series_key``): its metrics, its infrastructure and the gate's verdicts on it."""

    id: str = Field(description="<series_key>.<run_id>.s<step>")
    series_key: str
    run_id: str
    step: int
    target: str
    time_ms: int = Field(description="the step's first client start, Unix ms")
    judged_at_ms: int | None = Field(None, description="when the gate judged it, Unix ms")
    infra: str = Field(description="digest of infra_facts: a new value starts a segment")
    infra_facts: InfraFacts
    metrics: dict[str, float] = Field(description="read.iops, read.lat.p99, ... (see METRICS)")
    clients: int
    engine: str
    workload: JsonObject | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    gate: dict[str, KeptVerdict] = Field(default_factory=dict, description="by metric")

    def named(self) -> StepPoint:
        """This point with its metrics and verdicts under their current names."""
        return self.model_copy(
            update={
                "metrics": {metric_name(k): v for k, v in self.metrics.items()},
                "gate": {metric_name(k): v for k, v in self.gate.items()},
            }
        )


class PointFacts(BaseModel):
    """The fields of a point that list the series (``SeriesRepo.all_points``)."""

    model_config = ConfigDict(extra="ignore")
    series_key: str
    target: str
    time_ms: int
    clients: int
    engine: str
    workload: JsonObject | None = None


class SeriesSummary(BaseModel):
    """One series in GET /api/series."""

    series_key: str
    target: str
    clients: int
    engine: str
    workload: JsonObject | None
    points: int
    last_time_ms: int


class HistoryRow(BaseModel):
    """Plus one figure per metric (null if none): read.iops, read.bw_bytes, and latency by
    kind in ns, read.lat.p50/p99/p99.9 (total) and read.clat.p50/p99/p99.9 (completion);
    likewise write.*. Points recorded before the kinds were named hold completion latency,
    shown as read.clat.*."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, float | None] = Field(init=False)  # the metrics
    time_ms: int
    run_id: str
    segment: int
    new_segment: bool
    infra_facts: InfraFacts
    gate: dict[str, KeptVerdict]


class SeriesHistory(BaseModel):
    """GET /api/series/{key}: a series' points in time order with their segments, and the
    regressions and improvements found in it."""

    series_key: str
    target: str | None = Field(None, description="as its latest point records it")
    clients: int | None = None
    engine: str | None = None
    workload: JsonObject | None = None
    segments: int
    history: list[HistoryRow]
    regressions: list[Regression]
