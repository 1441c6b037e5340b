"""What the API answers besides a run's view (core.models.views) and the stored models it
serves as they are (schedules, series, regressions, a client's full result): errors,
health, curves, comparisons, profiles and the listings. FastAPI serializes every answer
through these models (``response_model``) and writes the OpenAPI document from them.

Keys the answers have always left out rather than shown as null are omitted when None.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.models.aggregate import omitted
from core.models.common import Engine
from core.models.regression import Regression
from core.models.schedule import StoredSchedule
from core.models.series import SeriesSummary
from core.models.state import RunState
from core.models.workload import Workload


class Answer(BaseModel):
    model_config = ConfigDict(frozen=True)


class OpenDoc(BaseModel):
    """A document read from outside (a chat platform's activity) that may carry more keys
    than it lists."""

    model_config = ConfigDict(extra="allow")


# ---- errors and health ---------------------------------------------------------------------


class ErrorDetail(Answer):
    field: str = Field(
        description="dotted path of the field at fault (workload.bs, targets.1), a header or "
        "query name, or (body), (path), (auth), (caller), (request), (service)"
    )
    message: str


class ErrorBody(Answer):
    """Every 4xx and 5xx answer: each problem found, by field."""

    errors: list[ErrorDetail] = Field(min_length=1)


class TimerTick(Answer):
    last_tick_at: str | None = Field(description="its last complete tick (UTC), if any")
    age_s: float | None = Field(description="seconds since then")


class Health(Answer):
    status: Literal["ok", "degraded"]
    checks: dict[str, str] = Field(
        description='per backing service ("cosmos") and timer ("timer.runs", '
        '"timer.schedules"): "ok", the error, or why the timer is stale'
    )
    timers: dict[str, TimerTick] = Field(
        default_factory=dict, description="each timer's last complete tick (when Cosmos DB answers)"
    )


# ---- curves --------------------------------------------------------------------------------


class LatencyPoint(Answer):
    """One step of the latency-versus-IOPS curve and, per direction that did I/O, total
    latency's p50, p99, p99.9, max and mean (``<dir>_lat_<p>_ns``; results recorded before
    total latency have none) and completion latency's p50 and p99 (``<dir>_clat_<p>_ns``)."""

    model_config = ConfigDict(frozen=True, validate_by_name=True, serialize_by_alias=True)
    step: int
    point: str
    mode: str = Field(description="rate-max: a rate sweep's unthrottled step; rate: its points")
    clients: int
    iops: float
    read_lat_p50_ns: float | None = omitted()
    read_lat_p99_ns: float | None = omitted()
    read_lat_p99_9_ns: float | None = omitted(alias="read_lat_p99.9_ns")
    read_lat_max_ns: float | None = omitted()
    read_lat_mean_ns: float | None = omitted()
    read_clat_p50_ns: float | None = omitted()
    read_clat_p99_ns: float | None = omitted()
    write_lat_p50_ns: float | None = omitted()
    write_lat_p99_ns: float | None = omitted()
    write_lat_p99_9_ns: float | None = omitted(alias="write_lat_p99.9_ns")
    write_lat_max_ns: float | None = omitted()
    write_lat_mean_ns: float | None = omitted()
    write_clat_p50_ns: float | None = omitted()
    write_clat_p99_ns: float | None = omitted()


class ScalePoint(Answer):
    point: str = Field(description="the workload (a sweep's point) this curve is of")
    clients: int
    iops: float
    bw_bytes: float
    linear_iops: float = Field(description="linear scaling from the curve's smallest count")
    efficiency: float | None


class RepetitionSpread(Answer):
    clients: int
    point: str
    repetitions: int
    mean_iops: float
    min_iops: float
    max_iops: float
    cv: float


class Curves(Answer):
    run_id: str
    latency: list[LatencyPoint] = Field(description="one point per kept step, in step order")
    scaleout: list[ScalePoint]
    repetitions: list[RepetitionSpread]


# ---- two runs compared ---------------------------------------------------------------------


class RunFacts(Answer):
    id: str
    state: RunState
    target: str
    profile: str | None
    engine: str
    created_at: str
    tags: dict[str, str]
    clients: int | None = Field(description="the last step's clients")


Verdict = Literal["better", "worse", "within noise", "no noise estimate"]


class CompareRow(Answer):
    metric: str
    a: float
    b: float
    delta: float
    delta_pct: float | None
    noise_pct: float | None
    verdict: Verdict


class Comparison(Answer):
    a: RunFacts
    b: RunFacts
    comparable: bool = Field(description="whether the two runs' comparison keys match")
    series_key: str | None
    noise_sigmas: float
    rows: list[CompareRow]
    summary: str


# ---- profiles and the listings -------------------------------------------------------------


class ProfileView(Answer):
    name: str
    version: int
    title: str
    source: str = Field(description="the published method it reproduces")
    engines: list[Engine]
    fill: bool
    files_per_target: int
    cooldown_s: int
    notes: str
    workload: Workload


class ProfileList(Answer):
    profiles: list[ProfileView]


class ScheduleList(Answer):
    schedules: list[StoredSchedule]


class SeriesList(Answer):
    series: list[SeriesSummary]


class RegressionList(Answer):
    regressions: list[Regression]
