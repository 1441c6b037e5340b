"""What ``GET /api/agents`` answers: every agent the registry knows, and each pool's
summary (its configuration, its agents now, their use and its cost)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from core.models.agents import AgentMount, AgentRecord, AgentState, Status


class AgentView(BaseModel):
    id: str
    pool: str
    status: Status = Field(description="gone: silent for 3 heartbeat periods; stopped: it said so")
    state: AgentState
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

    @classmethod
    def of(cls, record: AgentRecord, now_ms: int) -> AgentView:
        """The record without what only the service uses (its principal, session, past
        registrations' time), with its status and use now."""
        kept = record.model_dump(exclude={"principal", "session", "past_ms"})
        status, used_s = record.status(now_ms), round(record.used_ms(now_ms) / 1000, 3)
        return cls.model_validate({**kept, "status": status, "used_s": used_s})


class PoolView(BaseModel):
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


# POST /api/agents/register's answer: the registration accepted.
class Registered(BaseModel):
    status: Literal["registered"]
    heartbeat_s: float
