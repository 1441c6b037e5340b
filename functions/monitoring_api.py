"""Schedules, series, regressions and their triage, the profile catalogue and the target
registry."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Body, Response

from core.catalogue import PROFILES, get_profile
from core.errors import FieldError, Forbidden, NotFound
from core.models.regression import TriageState
from core.models.schedule import StoredSchedule
from core.models.series import SeriesHistory
from functions import apidocs_monitoring as m
from functions.openapi import doc
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

router = APIRouter(route_class=JsonRoute)
# Validated by the core (core.monitoring), as from every other door.
ScheduleAsSent = Annotated[Any, documented_as(m.ScheduleBody), Body()]
PatchAsSent = Annotated[Any, documented_as(m.SchedulePatchBody), Body()]
TriageAsSent = Annotated[Any, documented_as(m.TriageBody), Body()]


@router.get("/api/targets", **doc(m.TargetList, errors=STORE))
async def targets(parts: Parts) -> dict[str, Any]:
    """The target registry (BENCH_TARGETS) with who holds each target and who waits."""
    registry = list(parts.settings.targets)
    return {"targets": await asyncio.to_thread(parts.service.views.targets, registry)}


@router.post(
    "/api/schedules",
    **doc(m.ScheduleView, status=201, body=True, errors=(400, 403, *STORE)),
)
async def create_schedule(
    body: ScheduleAsSent, schedules: Schedules, caller: CallerOf
) -> StoredSchedule:
    """A cron expression (UTC), a run request template, enabled, owner."""
    if not caller.limits.manage:
        raise Forbidden([FieldError("(caller)", f"role {caller.role} may not change this")])
    return await asyncio.to_thread(schedules.create, body)


@router.get("/api/schedules", **doc(m.ScheduleList, errors=STORE))
async def list_schedules(schedules: Schedules) -> dict[str, Any]:
    return {"schedules": await asyncio.to_thread(schedules.list_all)}


@router.get("/api/schedules/{schedule_id}", **doc(m.ScheduleView, errors=(400, 404, *STORE)))
async def get_schedule(schedule_id: ScheduleId, schedules: Schedules) -> StoredSchedule:
    return await asyncio.to_thread(schedules.get, schedule_id)


@router.patch(
    "/api/schedules/{schedule_id}",
    **doc(m.ScheduleView, body=True, errors=(400, 403, 404, 409, *STORE)),
)
async def patch_schedule(
    schedule_id: ScheduleId, body: PatchAsSent, schedules: Schedules, caller: CallerOf
) -> StoredSchedule:
    """Engineers and admins change any schedule; runners enable, disable or rename
    their own (``owner``): 403 naming the field otherwise."""
    return await asyncio.to_thread(schedules.patch, schedule_id, body, caller)


@router.delete(
    "/api/schedules/{schedule_id}", **doc(None, status=204, errors=(400, 403, 404, *STORE))
)
async def delete_schedule(
    schedule_id: ScheduleId, schedules: Schedules, caller: CallerOf
) -> Response:
    """Engineers and admins delete any schedule; runners their own (``owner``)."""
    await asyncio.to_thread(schedules.delete, schedule_id, caller)
    return Response(status_code=204)


@router.get("/api/series", **doc(m.SeriesList, errors=STORE))
async def list_series(monitor: Monitoring) -> dict[str, Any]:
    return {"series": await asyncio.to_thread(monitor.list_series)}


@router.get("/api/series/{key}", **doc(m.SeriesHistory, errors=(400, 404, *STORE)))
async def series(key: SeriesKey, monitor: Monitoring) -> SeriesHistory:
    """History (time, run, IOPS, bandwidth, p50/p99/p99.9 per direction), infrastructure
    segments, regressions and improvements found."""
    found = await asyncio.to_thread(monitor.history, key)
    if not found.history:
        raise NotFound(f"series {key}")
    return found


@router.get("/api/regressions", **doc(m.RegressionList, errors=(400, *STORE)))
async def regressions(monitor: Monitoring, state: TriageState | None = None) -> dict[str, Any]:
    return {"regressions": await asyncio.to_thread(monitor.regressions, state)}


@router.patch(
    "/api/regressions/{key}/{regression_id}",
    **doc(m.Regression, body=True, errors=(400, 403, 404, 409, *STORE)),
)
async def triage(
    key: SeriesKey,
    regression_id: RegressionId,
    body: TriageAsSent,
    monitor: Monitoring,
    caller: CallerOf,
) -> Any:
    """Engineers and admins triage any regression; runners those first seen on their
    own runs (403 naming ``first_run_id`` otherwise)."""
    state = body.get("state") if isinstance(body, dict) else None
    return await asyncio.to_thread(monitor.triage, key, regression_id, str(state), caller)


@router.get("/api/profiles", **doc(m.ProfileList))
async def profiles() -> dict[str, Any]:
    return {"profiles": [p.describe() for p in PROFILES]}


@router.get("/api/profiles/{name}", **doc(m.ProfileView, errors=(400, 404)))
async def profile(name: ProfileName) -> dict[str, Any]:
    try:
        return get_profile(name).describe()
    except KeyError as e:
        raise NotFound(str(e.args[0])) from None
