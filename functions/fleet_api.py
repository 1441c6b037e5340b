"""The agent registry's routes: agents register and heartbeat (POST /api/agent/register);
callers list agents and pools (GET /api/agents)."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query

from core.fleet import views as f
from core.fleet.views import AgentList
from core.models import POOL_PATTERN
from core.models.agents import Registration
from functions.auth import agent_ref
from functions.openapi import SIGNED_IN, doc
from functions.params import STORE, CallerOf, JsonRoute, Svc

router = APIRouter(route_class=JsonRoute, **SIGNED_IN)


@router.post(
    "/api/agent/register",
    tags=["agent protocol"],
    **doc(f.Registered, body=True, errors=(400, 403, 409, 503)),
)
async def register(b: Registration, svc: Svc, caller: CallerOf) -> f.Registered:
    """An agent's registration at start and its heartbeat every ``heartbeat_s`` seconds;
    accepted only for the calling agent's own id (403 naming agent_id otherwise)."""
    agent = agent_ref(caller, b.agent_id)
    record = await asyncio.to_thread(svc.fleet.register, b, agent)
    return f.Registered(status="registered", heartbeat_s=record.heartbeat_s)


@router.get(
    "/api/agents",
    tags=["agents and pools"],
    **doc(f.AgentList, errors=(400, *STORE)),
)
async def agents(
    svc: Svc,
    pool: Annotated[str | None, Query(pattern=POOL_PATTERN)] = None,
) -> AgentList:
    """Every agent the registry knows (live, gone or stopped) and each pool's size, live
    agents, client VM time and cost."""
    return await asyncio.to_thread(svc.fleet.view, pool)
