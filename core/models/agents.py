"""The agent registry's documents (pure; core.fleet serves them): what each agent told the
service about itself, and whether it is still there.

An agent registers when it starts and then reports every ``heartbeat_s`` seconds (30 by
default: one small write per agent and period), idle or busy: its pool, its mounts (alias,
filesystem type, source, options, and whether it can use each now), the engines it can
run, its OS, version, VM size, region and CPU count, and what it is doing. An agent not
heard from for ``GONE_PERIODS`` heartbeat periods is gone (a VM deleted, a crash, a network
cut); the items it held follow the queue's redelivery rules as before. One that stopped
cleanly says so (``stopped``) and is released at once.

A record is kept per agent id (the VM's name), across restarts: a new ``session`` (a new
process) starts a new registration, and the time of the previous one is kept in
``past_ms`` for the pool's usage.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.models import Alias
from core.models.stored import _Stored

GONE_PERIODS = 3
DEFAULT_HEARTBEAT_S = 30.0
AGENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"  # a Cosmos DB id, a host name
Engine = Literal["fio", "diskspd"]
AgentState = Literal["idle", "busy", "stopped"]
Status = Literal["live", "gone", "stopped"]


class AgentMount(BaseModel):
    model_config = ConfigDict(extra="forbid")

    alias: Alias
    path: str = Field(max_length=1024)
    fstype: str = Field(max_length=64, description="as /proc/self/mountinfo spells it")
    source: str = Field(max_length=1024)
    options: str = Field(max_length=4096)
    usable: bool = Field(description="the agent runs items on it now (agent/mounts.py)")
    problem: str | None = Field(None, max_length=1000, description="why it is not usable")


class Registration(BaseModel):
    """What an agent sends to POST /api/agent/register, at start and every heartbeat."""

    model_config = ConfigDict(extra="forbid")

    agent_id: str = Field(pattern=AGENT_ID_PATTERN)
    pool: str = Field(pattern=r"^[a-z0-9](?:[a-z0-9-]{0,28}[a-z0-9])?$")
    session: str = Field(
        pattern=r"^[0-9a-f]{32}$", description="one per agent process: a new one re-registers"
    )
    state: AgentState = "idle"
    item_id: str | None = Field(None, max_length=256, description="the item it holds")
    mounts: list[AgentMount] = Field(default_factory=list, max_length=64)
    engines: list[Engine] = Field(default_factory=list, max_length=2)
    os: str = Field("", max_length=200)
    kernel: str = Field("", max_length=200)
    hostname: str = Field("", max_length=255)
    version: str = Field("", max_length=64)
    vm_size: str | None = Field(None, max_length=64)
    region: str | None = Field(None, max_length=64)
    cpu_count: int = Field(0, ge=0, le=100_000)
    heartbeat_s: float = Field(DEFAULT_HEARTBEAT_S, ge=0.5, le=3600)


class AgentRecord(_Stored):
    """The registry's document for one agent (container ``agents``, id = agent id)."""

    id: str
    pool: str
    principal: str | None = None  # what its credential proved at registration
    session: str
    state: AgentState = "idle"
    item_id: str | None = None
    mounts: list[AgentMount] = Field(default_factory=list)
    engines: list[str] = Field(default_factory=list)
    os: str = ""
    kernel: str = ""
    hostname: str = ""
    version: str = ""
    vm_size: str | None = None
    region: str | None = None
    cpu_count: int = 0
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    registered_ms: int
    last_seen_ms: int
    released_ms: int | None = None  # when it stopped cleanly
    past_ms: int = 0  # client VM time of its earlier registrations

    def status(self, now_ms: int) -> Status:
        if self.released_ms is not None:
            return "stopped"
        silent_ms = now_ms - self.last_seen_ms
        return "live" if silent_ms <= GONE_PERIODS * self.heartbeat_s * 1000 else "gone"

    def live(self, now_ms: int) -> bool:
        return self.status(now_ms) == "live"

    def end_ms(self, now_ms: int) -> int:
        """When its current registration ended: released, last heard from, or still on."""
        if self.released_ms is not None:
            return self.released_ms
        return now_ms if self.live(now_ms) else self.last_seen_ms

    def used_ms(self, now_ms: int) -> int:
        """Client VM time: from each registration to its release (or last sign of life)."""
        return self.past_ms + max(0, self.end_ms(now_ms) - self.registered_ms)

    def usable_mounts(self) -> set[str]:
        return {m.alias for m in self.mounts if m.usable}


def record_from(
    reg: Registration, previous: AgentRecord | None, principal: str | None, now_ms: int
) -> AgentRecord:
    """The registry's document after ``reg`` arrives (a registration or a heartbeat)."""
    same = previous is not None and previous.session == reg.session
    past = 0
    if previous is not None:
        past = previous.past_ms
        if not same:  # a restart: close the previous registration's account
            past += max(0, previous.end_ms(now_ms) - previous.registered_ms)
    registered = previous.registered_ms if previous is not None and same else now_ms
    return AgentRecord(
        id=reg.agent_id,
        pool=reg.pool,
        principal=principal,
        session=reg.session,
        state=reg.state,
        item_id=reg.item_id if reg.state == "busy" else None,
        mounts=reg.mounts,
        engines=sorted(set(reg.engines)),
        os=reg.os,
        kernel=reg.kernel,
        hostname=reg.hostname,
        version=reg.version,
        vm_size=reg.vm_size,
        region=reg.region,
        cpu_count=reg.cpu_count,
        heartbeat_s=reg.heartbeat_s,
        registered_ms=registered,
        last_seen_ms=now_ms,
        released_ms=now_ms if reg.state == "stopped" else None,
        past_ms=past,
        _etag=previous.etag if previous is not None else None,
    )
