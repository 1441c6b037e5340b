"""The admin's routes (role admin only, 403 otherwise): delete a run or a series with
everything it owns, and move a deployment's runs, series and schedules to another one
(``benchctl export-all`` reads them here, ``benchctl import-all`` writes them to the other
deployment here). adapters/archive.py says what a run and a series own."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Request
from fastapi.responses import Response

from adapters.archive import MAX_IMPORT_DOCUMENTS, settled
from adapters.blob import MAX_ARTIFACT_BYTES
from core.errors import FieldError, Forbidden, ValidationFailed
from core.models import archive as a
from core.runs.guardrails import Caller
from functions.inputs import Continuation
from functions.openapi import SIGNED_IN, doc
from functions.params import (
    STORE,
    CallerOf,
    Parts,
    RunId,
    SeriesKey,
    capped,
    documented_as,
    read_body,
)

ADMIN_ERRORS = (400, 403, 404, *STORE)
Owner = Annotated[str, Path(pattern=r"^r-[0-9a-f]{32}\.s[0-9]{1,4}(\.c[0-9]{1,4})?$")]
Name = Annotated[str, Path(pattern=r"^[a-z]{1,16}$")]
# One import request, refused (413) before it is read beyond this: benchctl sends batches of
# at most 8 MiB of documents (benchctl/cli_admin.py), each document at most 2 MB.
MAX_IMPORT_BYTES = 16 << 20
router = APIRouter(route_class=capped(MAX_IMPORT_BYTES), tags=["admin"], **SIGNED_IN)
# Checked by adapters/archive.py, document by document, before anything is written.
RunImportAsSent = Annotated[Any, documented_as(a.RunImport), Body()]
SchedulesAsSent = Annotated[Any, documented_as(a.ScheduleImport), Body()]


def _admin(caller: Caller) -> None:
    if caller.role != "admin":
        raise Forbidden([FieldError("(caller)", f"role {caller.role} is not admin")])


@router.delete("/api/admin/runs/{run_id}", **doc(a.Removed, errors=(*ADMIN_ERRORS, 409)))
async def delete_run(run_id: RunId, parts: Parts, caller: CallerOf) -> a.Removed:
    """Delete a finished run and all it owns: items, results, aggregates, its series points,
    the regressions first seen on it, its artifacts (409 while it is not finished)."""
    _admin(caller)
    return a.Removed(removed=await asyncio.to_thread(parts.archive.purge_run, run_id))


@router.delete("/api/admin/series/{series_key}", **doc(a.Removed, errors=(*ADMIN_ERRORS, 409)))
async def delete_series(series_key: SeriesKey, parts: Parts, caller: CallerOf) -> a.Removed:
    """Delete a series: its points and regressions, and every run it holds, whole."""
    _admin(caller)
    return a.Removed(removed=await asyncio.to_thread(parts.archive.purge_series, series_key))


@router.get("/api/admin/export/runs", **doc(a.ExportedRuns, errors=(400, 403, 404, *STORE)))
async def export_runs(
    parts: Parts,
    caller: CallerOf,
    limit: Annotated[int, Query(ge=1, le=200)] = 100,
    continuation: Continuation = None,
) -> a.ExportedRuns:
    """A page of the deployment's runs, newest first: the finished ones to move."""
    _admin(caller)
    runs, token = await asyncio.to_thread(
        parts.store.runs.page,
        target=None,
        state=None,
        tag=None,
        limit=limit,
        continuation=continuation,
    )
    return a.ExportedRuns(
        runs=[r.id for r in runs if settled(r)],
        unfinished=[r.id for r in runs if not settled(r)],
        continuation=token,
    )


@router.get("/api/admin/export/runs/{run_id}", **doc(a.RunBundle, errors=(*ADMIN_ERRORS, 409)))
async def export_run(run_id: RunId, parts: Parts, caller: CallerOf) -> a.RunBundle:
    """A finished run with everything it owns, documents as stored."""
    _admin(caller)
    return await asyncio.to_thread(parts.archive.bundle, run_id)


@router.get(
    "/api/admin/export/artifacts/{run_id}/{owner}/{name}",
    **doc(None, download="the artifact's bytes, as stored (gzip)", errors=ADMIN_ERRORS),
)
async def export_artifact(
    run_id: RunId, owner: Owner, name: Name, parts: Parts, caller: CallerOf
) -> Response:
    _admin(caller)
    data = await asyncio.to_thread(parts.artifacts.get, run_id, owner, name)
    return Response(data, media_type="application/gzip")


@router.get("/api/admin/export/schedules", **doc(a.ExportedSchedules, errors=(403, *STORE)))
async def export_schedules(parts: Parts, caller: CallerOf) -> a.ExportedSchedules:
    _admin(caller)
    return a.ExportedSchedules(schedules=await asyncio.to_thread(parts.archive.schedules))


def _import_body(
    body: object, listed: str, allowed: set[str]
) -> tuple[Mapping[str, object], list[object]]:
    """The JSON object of an import as sent (only ``allowed`` keys) and its ``listed`` list
    (bounded). Raw input at the door: adapters/archive.py checks each document, naming it
    by its place in the list, before anything is written."""
    if not isinstance(body, dict):
        raise ValidationFailed([FieldError("(body)", "must be an object")])
    stray = sorted(set(body) - allowed)
    if stray:
        raise ValidationFailed([FieldError(stray[0], "unknown field")])
    items = body.get(listed, [])
    if not isinstance(items, list) or len(items) > MAX_IMPORT_DOCUMENTS:
        raise ValidationFailed([FieldError(listed, f"a list of at most {MAX_IMPORT_DOCUMENTS}")])
    return body, items


@router.post(
    "/api/admin/import/runs/{run_id}",
    **doc(a.Imported, body=True, errors=(400, 403, 413, *STORE)),
)
async def import_run(
    run_id: RunId, sent: RunImportAsSent, parts: Parts, caller: CallerOf
) -> a.Imported:
    """A finished run's documents, created when missing after all are checked; ``commit``
    writes the run's own document last (benchctl's last batch of the run)."""
    _admin(caller)
    body, documents = _import_body(sent, "documents", {"run", "documents", "commit"})
    commit = body.get("commit")
    if not isinstance(commit, bool):
        raise ValidationFailed([FieldError("commit", "required: true or false")])
    return await asyncio.to_thread(
        parts.archive.import_run, run_id, body.get("run"), documents, commit=commit
    )


@router.post(
    "/api/admin/import/schedules",
    **doc(a.Imported, body=True, errors=(400, 403, 413, *STORE)),
)
async def import_schedules(sent: SchedulesAsSent, parts: Parts, caller: CallerOf) -> a.Imported:
    """Schedules as exported (ids and times kept), each checked as at creation."""
    _admin(caller)
    _, schedules = _import_body(sent, "schedules", {"schedules"})
    return await asyncio.to_thread(parts.archive.import_schedules, schedules)


@router.put(
    "/api/admin/import/artifacts/{run_id}/{owner}/{name}",
    **doc(
        a.ArtifactImported,
        status=201,
        binary="application/gzip",
        errors=(400, 403, 413, *STORE),
    ),
)
async def import_artifact(
    run_id: RunId, owner: Owner, name: Name, request: Request, parts: Parts, caller: CallerOf
) -> a.ArtifactImported:
    """An artifact as exported (stored as given, overwriting the same name)."""
    _admin(caller)
    if not owner.startswith(run_id + "."):
        raise ValidationFailed([FieldError("owner", f"not an item or step of {run_id}")])
    data = await read_body(request, MAX_ARTIFACT_BYTES)
    await asyncio.to_thread(parts.artifacts.put, run_id, owner, name, data)
    return a.ArtifactImported(stored=True, bytes=len(data))
