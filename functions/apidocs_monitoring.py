"""What the monitoring side of the API answers (compare, targets, schedules, series,
regressions, profiles), as models for its OpenAPI document; see functions/apidocs.py."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.models import Engine, RunRequest, Workload
from core.models.regression import TriageState
from core.models.state import RunState
from core.monitoring.schedules import CRON_SCHEMA, Schedule
from functions.apidocs import OpenDoc


class RunFacts(OpenDoc):
    id: str
    state: RunState
    target: str
    profile: str | None
    engine: Engine
    created_at: str
    tags: dict[str, str]
    clients: int | None


class CompareRow(BaseModel):
    metric: str
    a: float
    b: float
    delta: float
    delta_pct: float | None
    noise_pct: float | None
    verdict: Literal["better", "worse", "within noise", "no noise estimate"]


class Comparison(BaseModel):
    a: RunFacts
    b: RunFacts
    comparable: bool = Field(description="whether the two runs' comparison keys match")
    series_key: str | None
    noise_sigmas: float
    rows: list[CompareRow]
    summary: str


class TargetState(OpenDoc):
    alias: str
    pool: str
    read_only: bool
    description: str
    busy: bool
    waiting: int


class TargetList(BaseModel):
    targets: list[TargetState]


# ---- schedules, series, regressions, profiles --------------------------------------------


class ScheduleBody(Schedule):
    """Body of POST /api/schedules."""

    request: RunRequest = Field(description="the run request started at each fire time")  # type: ignore[assignment]


class ScheduleView(OpenDoc):
    id: str
    cron: str
    request: RunRequest
    enabled: bool
    owner: str
    name: str | None
    created_at: str
    last_fired: str | None
    last_run_id: str | None
    next_fire: str


class ScheduleList(BaseModel):
    schedules: list[ScheduleView]


class SchedulePatchBody(BaseModel):
    """Body of PATCH /api/schedules/{id}: only the fields sent change."""

    model_config = ConfigDict(extra="forbid")
    cron: str = Field(None, description="5-field cron in UTC", json_schema_extra=CRON_SCHEMA)  # type: ignore[assignment]
    request: RunRequest = None  # type: ignore[assignment]
    enabled: bool = None  # type: ignore[assignment]
    owner: str = Field(None, min_length=1, max_length=128)  # type: ignore[assignment]
    name: str | None = Field(None, max_length=128)


class SeriesSummary(OpenDoc):
    series_key: str
    target: str
    clients: int
    engine: str
    workload: dict[str, Any] | None
    points: int
    last_time_ms: int


class SeriesList(BaseModel):
    series: list[SeriesSummary]


class Regression(OpenDoc):
    """A change found in a series, with its evidence (before/after, runs around it)."""

    id: str
    series_key: str
    target: str | None = None
    state: TriageState
    metric: str
    kind: Literal["regression", "improvement"]
    method: str
    first_run_id: str
    change_pct: float | None = None


class RegressionList(BaseModel):
    regressions: list[Regression]


class HistoryRow(OpenDoc):
    """Plus one figure per metric (null if none): read.iops, read.bw_bytes, and latency by
    kind in ns, read.lat.p50/p99/p99.9 (total) and read.clat.p50/p99/p99.9 (completion);
    likewise write.*. Points recorded before the kinds were named hold completion latency,
    shown as read.clat.*."""

    time_ms: int
    run_id: str
    segment: int
    new_segment: bool
    infra_facts: dict[str, Any]
    gate: dict[str, Any]


class SeriesHistory(BaseModel):
    series_key: str
    target: str | None = Field(None, description="as its latest point records it")
    clients: int | None = None
    engine: str | None = None
    workload: dict[str, Any] | None = None
    segments: int
    history: list[HistoryRow]
    regressions: list[Regression]


class TriageBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    state: TriageState


class ProfileView(OpenDoc):
    name: str
    version: int
    title: str
    source: str
    engines: list[Engine]
    fill: bool
    files_per_target: int
    workload: Workload


class ProfileList(BaseModel):
    profiles: list[ProfileView]
