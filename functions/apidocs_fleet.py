"""OpenAPI models of the fleet's answers: the agent registry and the pools (GET
/api/agents) and a registration's reply."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from core.fleet.views import AgentList, AgentView, PoolView

__all__ = ["AgentList", "AgentView", "PoolView", "Registered"]


class Registered(BaseModel):
    status: Literal["registered"]
    heartbeat_s: float
