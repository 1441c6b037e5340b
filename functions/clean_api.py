"""``POST /api/targets/{alias}/clean``: an agent of the target's pool removes the
benchmark files there (core.runs.clean)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field

from core.errors import FieldError, Forbidden
from core.models import ALIAS_PATTERN, POOL_PATTERN
from core.runs.clean import CleanOrder
from functions.openapi import doc
from functions.params import STORE, CallerOf, JsonRoute, Svc

router = APIRouter(route_class=JsonRoute)


class CleanOrdered(CleanOrder):
    """The order as sent: the first agent of the pool that has the target carries it out
    (its log says what it removed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    state: Literal["queued"]


class CleanBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    pool: str | None = Field(
        None, pattern=POOL_PATTERN, description="the target's pool (needed when several have it)"
    )


@router.post(
    "/api/targets/{alias}/clean",
    **doc(CleanOrdered, status=202, body=True, errors=(400, 403, 404, 409, *STORE)),
)
async def clean_target(
    body: CleanBody,
    alias: Annotated[str, Path(pattern=ALIAS_PATTERN)],
    svc: Svc,
    caller: CallerOf,
) -> dict[str, Any]:
    """Remove the benchmark files under ``<mount>/.benchsvc/`` on the target: the agents'
    kept working sets and what runs left. Engineers and admins; **409** naming the run
    while one holds or waits for the target, **400** for a read-only target."""
    if not caller.limits.manage:
        raise Forbidden([FieldError("(caller)", f"role {caller.role} may not clean targets")])
    return await asyncio.to_thread(svc.clean, alias, body.pool, caller)
