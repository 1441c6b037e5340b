"""Runs (partition /id: point reads by run id dominate; listing is a cross-partition query)
and target locks (/id: one document per pool and target)."""

from __future__ import annotations

from adapters.cosmos.base import Container, Param
from core.models.locks import TargetLock
from core.models.stored import Run


class CosmosRuns:
    def __init__(self, container: Container) -> None:
        self._c = container

    def create(self, run: Run) -> Run:
        return Run.model_validate(self._c.create(run.doc()))

    def get(self, run_id: str) -> Run:
        return Run.model_validate(self._c.read(run_id, run_id))

    def replace(self, run: Run) -> Run:
        return Run.model_validate(self._c.replace(run.doc(), run.etag))

    def page(
        self,
        *,
        target: str | None,
        state: str | None,
        tag: tuple[str, str] | None,
        limit: int,
        continuation: str | None,
    ) -> tuple[list[Run], str | None]:
        # Only fixed clauses are joined; every value travels as a query parameter.
        where: list[str] = []
        params: list[Param] = []
        if target:
            where.append("ARRAY_CONTAINS(c.targets, @target)")
            params.append({"name": "@target", "value": target})
        if state:
            where.append("c.state = @state")
            params.append({"name": "@state", "value": state})
        if tag:
            where.append("c.tags[@tagkey] = @tagvalue")
            params += [{"name": "@tagkey", "value": tag[0]}, {"name": "@tagvalue", "value": tag[1]}]
        sql = "SELECT * FROM c" + (" WHERE " + " AND ".join(where) if where else "")  # noqa: S608
        sql += " ORDER BY c.created_ms DESC"
        docs, token = self._c.page(sql, params, limit=limit, continuation=continuation)
        return [Run.model_validate(d) for d in docs], token

    def due(self, now_ms: int) -> list[Run]:
        docs = self._c.query(
            "SELECT * FROM c WHERE IS_NUMBER(c.due_ms) AND c.due_ms <= @now",
            [{"name": "@now", "value": now_ms}],
        )
        return [Run.model_validate(d) for d in docs]

    def active(self, pool: str) -> list[Run]:
        docs = self._c.query(
            "SELECT * FROM c WHERE c.pool = @pool AND c.admitted = true AND c.finished = false",
            [{"name": "@pool", "value": pool}],
        )
        return [Run.model_validate(d) for d in docs]


class CosmosTargets:
    def __init__(self, container: Container) -> None:
        self._c = container

    def get(self, key: str) -> TargetLock:
        return TargetLock.model_validate(self._c.read(key, key))

    def create(self, lock: TargetLock) -> TargetLock:
        return TargetLock.model_validate(self._c.create(lock.doc()))

    def replace(self, lock: TargetLock) -> TargetLock:
        return TargetLock.model_validate(self._c.replace(lock.doc(), lock.etag))

    def with_waiters(self) -> list[TargetLock]:
        """The locks of targets runs wait for, without their queues (a held target's queue
        can be a thousand runs long, and the timer asks every tick): who holds each."""
        docs = self._c.query(
            "SELECT c.id, c.run_id, c.since_ms FROM c WHERE ARRAY_LENGTH(c.queue) > 0", []
        )
        return [TargetLock.model_validate(d) for d in docs]
