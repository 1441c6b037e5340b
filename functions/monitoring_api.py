"""Schedules, series, regressions and their triage, the profile catalogue and the target
registry."""

from __future__ import annotations

import asyncio
from enum import Enum
from typing import Annotated, Any

from fastapi import APIRouter, Body, Response
from pydantic import BaseModel, ConfigDict, Field

from core.catalogue import PROFILES, get_profile
from core.errors import FieldError, Forbidden, NotFound
from core.models import RunRequest
from core.models.answers import ProfileList, ProfileView, RegressionList, ScheduleList, SeriesList
from core.models.regression import Regression, TriageState
from core.models.schedule import StoredSchedule
from core.models.series import SeriesHistory
from core.monitoring.schedules import CRON_SCHEMA, Schedule
from core.runs.views import TargetList
from functions.openapi import SIGNED_IN, doc
from functions.params import (
    STORE,
    CallerOf,
    JsonRoute,
    Monitoring,
    Parts,
    ProfileName,
    RegressionId,
    ScheduleId,
    Schedules,
    SeriesKey,
    documented_as,
)

router = APIRouter(route_class=JsonRoute, **SIGNED_IN)
# Each route's tag (Swagger UI's group).
SCHEDULES: list[str | Enum] = ["schedules"]
SERIES: list[str | Enum] = ["series and regressions"]
CATALOGUE: list[str | Enum] = ["catalogue and targets"]


# ---- the bodies, as documented: validated by the core (core.monitoring), as from every door


class ScheduleBody(Schedule):
    """Body of POST /api/schedules."""

    request: RunRequest = Field(description="the run request started at each fire time")


class SchedulePatchBody(BaseModel):
    """Body of PATCH /api/schedules/{id}: only the fields sent change."""

    model_config = ConfigDict(extra="forbid")
    cron: str = Field(None, description="5-field cron in UTC", json_schema_extra=CRON_SCHEMA)  # type: ignore[assignment]
    request: RunRequest = None  # type: ignore[assignment]
    enabled: bool = None  # type: ignore[assignment]
    owner: str = Field(None, min_length=1, max_length=128)  # type: ignore[assignment]
    name: str | None = Field(None, max_length=128)


class TriageBody(BaseModel):
    model_config = ConfigDict(extra="allow")
    state: TriageState


ScheduleAsSent = Annotated[Any, documented_as(ScheduleBody), Body()]
PatchAsSent = Annotated[Any, documented_as(SchedulePatchBody), Body()]
TriageAsSent = Annotated[Any, documented_as(TriageBody), Body()]


@router.get("/api/targets", tags=CATALOGUE, **doc(TargetList, errors=STORE))
async def targets(parts: Parts) -> TargetList:
    """The target registry (BENCH_TARGETS) with who holds each target and who waits."""
    registry = list(parts.settings.targets)
    return TargetList(targets=await asyncio.to_thread(parts.service.views.targets, registry))


@router.post(
    "/api/schedules",
    tags=SCHEDULES,
    **doc(StoredSchedule, status=201, body=True, errors=(400, 403, *STORE)),
)
async def create_schedule(
    body: ScheduleAsSent, schedules: Schedules, caller: CallerOf
) -> StoredSchedule:
    """A cron expression (UTC), a run request template, enabled, owner."""
    if not caller.limits.manage:
        raise Forbidden([FieldError("(caller)", f"role {caller.role} may not change this")])
    return await asyncio.to_thread(schedules.create, body)


@router.get("/api/schedules", tags=SCHEDULES, **doc(ScheduleList, errors=STORE))
async def list_schedules(schedules: Schedules) -> ScheduleList:
    return ScheduleList(schedules=await asyncio.to_thread(schedules.list_all))


@router.get(
    "/api/schedules/{schedule_id}", tags=SCHEDULES, **doc(StoredSchedule, errors=(400, 404, *STORE))
)
async def get_schedule(schedule_id: ScheduleId, schedules: Schedules) -> StoredSchedule:
    return await asyncio.to_thread(schedules.get, schedule_id)


@router.patch(
    "/api/schedules/{schedule_id}",
    tags=SCHEDULES,
    **doc(StoredSchedule, body=True, errors=(400, 403, 404, 409, *STORE)),
)
async def patch_schedule(
    schedule_id: ScheduleId, body: PatchAsSent, schedules: Schedules, caller: CallerOf
) -> StoredSchedule:
    """Engineers and admins change any schedule; runners enable, disable or rename
    their own (``owner``): 403 naming the field otherwise."""
    return await asyncio.to_thread(schedules.patch, schedule_id, body, caller)


@router.delete(
    "/api/schedules/{schedule_id}",
    tags=SCHEDULES,
    **doc(None, status=204, errors=(400, 403, 404, *STORE)),
)
async def delete_schedule(
    schedule_id: ScheduleId, schedules: Schedules, caller: CallerOf
) -> Response:
    """Engineers and admins delete any schedule; runners their own (``owner``)."""
    await asyncio.to_thread(schedules.delete, schedule_id, caller)
    return Response(status_code=204)


@router.get("/api/series", tags=SERIES, **doc(SeriesList, errors=STORE))
async def list_series(monitor: Monitoring) -> SeriesList:
    return SeriesList(series=await asyncio.to_thread(monitor.list_series))


@router.get("/api/series/{key}", tags=SERIES, **doc(SeriesHistory, errors=(400, 404, *STORE)))
async def series(key: SeriesKey, monitor: Monitoring) -> SeriesHistory:
    """History (time, run, IOPS, bandwidth, p50/p99/p99.9 per direction), infrastructure
    segments, regressions and improvements found."""
    found = await asyncio.to_thread(monitor.history, key)
    if not found.history:
        raise NotFound(f"series {key}")
    return found


@router.get("/api/regressions", tags=SERIES, **doc(RegressionList, errors=(400, *STORE)))
async def regressions(monitor: Monitoring, state: TriageState | None = None) -> RegressionList:
    return RegressionList(regressions=await asyncio.to_thread(monitor.regressions, state))


@router.patch(
    "/api/regressions/{key}/{regression_id}",
    tags=SERIES,
    **doc(Regression, body=True, errors=(400, 403, 404, 409, *STORE)),
)
async def triage(
    key: SeriesKey,
    regression_id: RegressionId,
    body: TriageAsSent,
    monitor: Monitoring,
    caller: CallerOf,
) -> Regression:
    """Engineers and admins triage any regression; runners those first seen on their
    own runs (403 naming ``first_run_id`` otherwise)."""
    state = body.get("state") if isinstance(body, dict) else None
    return await asyncio.to_thread(monitor.triage, key, regression_id, str(state), caller)


@router.get("/api/profiles", tags=CATALOGUE, **doc(ProfileList))
async def profiles() -> ProfileList:
    return ProfileList(profiles=[p.describe() for p in PROFILES])


@router.get("/api/profiles/{name}", tags=CATALOGUE, **doc(ProfileView, errors=(400, 404)))
async def profile(name: ProfileName) -> ProfileView:
    try:
        return get_profile(name).describe()
    except KeyError as e:
        raise NotFound(str(e.args[0])) from None
