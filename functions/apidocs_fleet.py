"""OpenAPI models of the fleet's answers: the agent registry and the pools (GET
/api/agents) and a registration's reply."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from core.models.agents import AgentMount
from core.models.answers import OpenDoc


class AgentView(OpenDoc):
    id: str
    pool: str
    status: Literal["live", "gone", "stopped"] = Field(
        description="gone: silent for 3 heartbeat periods; stopped: it said so"
    )
    state: Literal["idle", "busy", "stopped"]
    item_id: str | None
    mounts: list[AgentMount]
    engines: list[str]
    os: str
    kernel: str
    hostname: str
    version: str
    vm_size: str | None
    region: str | None
    cpu_count: int
    heartbeat_s: float
    registered_ms: int
    last_seen_ms: int
    released_ms: int | None
    used_s: float = Field(description="client VM time, registration to release, all sessions")


class PoolView(OpenDoc):
    pool: str
    elastic: bool
    size: int | None = Field(description="declared size (max for an elastic pool)")
    min: int | None
    idle_s: float | None
    live: int
    busy: int
    known: int
    used_s: float = Field(description="client VM time of all its agents, registration to release")
    price_per_hour: float | None
    cost: float | None = Field(description="used_s at price_per_hour, when the pool has a price")
    capacity: int | None = Field(None, description="elastic: the capacity the service asked for")
    missing: int | None = Field(None, description="elastic: agents asked for, not yet live")


class AgentList(BaseModel):
    agents: list[AgentView]
    pools: list[PoolView]


class Registered(BaseModel):
    status: Literal["registered"]
    heartbeat_s: float
