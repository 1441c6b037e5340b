"""The agent registry (partition /id: one document per agent, written by its own heartbeats;
the list is a cross-partition query, small: one document per client VM)."""

from __future__ import annotations

from adapters.cosmos.base import Container, Param
from core.models.agents import AgentRecord


class CosmosAgents:
    def __init__(self, container: Container) -> None:
        self._c = container

    def get(self, agent_id: str) -> AgentRecord:
        return AgentRecord.model_validate(self._c.read(agent_id, agent_id))

    def create(self, record: AgentRecord) -> AgentRecord:
        return AgentRecord.model_validate(self._c.create(record.doc()))

    def replace(self, record: AgentRecord) -> AgentRecord:
        return AgentRecord.model_validate(self._c.replace(record.doc(), record.etag))

    def all(self, pool: str | None = None) -> list[AgentRecord]:
        params: list[Param] = []
        sql = "SELECT * FROM c"
        if pool is not None:
            sql += " WHERE c.pool = @pool"
            params.append({"name": "@pool", "value": pool})
        return [AgentRecord.model_validate(d) for d in self._c.query(sql, params)]
