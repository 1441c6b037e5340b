"""The fleet as the API and intake see it: registrations, the registry's view, pools'
sizes and usage, and the admission check (over the agents repository)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from core.errors import BenchError, Conflict, FieldError, Forbidden, NotFound, ValidationFailed
from core.fleet.admission import fleet_errors
from core.fleet.pools import PoolConfig
from core.fleet.scaling import PoolScaler, Waiting
from core.fleet.views import AgentList, AgentView, PoolView
from core.models.agents import AgentRecord, Registration, record_from
from core.models.holder import AgentRef
from core.models.stored import Run
from core.ports import AgentRepo

log = logging.getLogger(__name__)
CAS_ATTEMPTS = 5


def cost(seconds: float, price: float | None) -> float | None:
    """What ``seconds`` of client VM time cost at ``price`` per VM and hour."""
    return None if price is None else round(seconds / 3600 * price, 6)


class Fleet:
    def __init__(
        self,
        agents: AgentRepo,
        pools: Sequence[PoolConfig],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.agents = agents
        self.pools = {p.name: p for p in pools}
        self.clock = clock
        self.scaler: PoolScaler | None = None  # elastic pools' capacity (core.fleet.scaling)

    def price_of(self, pool: str) -> float | None:
        config = self.pools.get(pool)
        return config.price if config else None

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def register(self, reg: Registration, agent: AgentRef) -> AgentRecord:
        """Record a registration or heartbeat; only the agent itself may (its key's name,
        or the managed identity it registered with)."""
        if agent.id != reg.agent_id:
            message = f"agent {agent.id} cannot register as {reg.agent_id}"
            raise Forbidden([FieldError("agent_id", message)])
        if reg.pool not in self.pools:
            known = ", ".join(self.pools)
            message = f"no agent pool {reg.pool!r} (known: {known})"
            raise ValidationFailed([FieldError("pool", message)])
        for _ in range(CAS_ATTEMPTS):
            try:
                previous: AgentRecord | None = self.agents.get(reg.agent_id)
            except NotFound:
                previous = None
            if previous is not None and previous.principal != agent.principal:
                raise Forbidden(
                    [
                        FieldError(
                            "agent_id",
                            f"agent {reg.agent_id} is registered under another identity",
                        )
                    ]
                )
            record = record_from(reg, previous, agent.principal, self.now_ms())
            try:
                if previous is None:
                    return self.agents.create(record)
                return self.agents.replace(record)
            except Conflict:
                continue  # a concurrent beat of the same agent: read it again
        raise Conflict(f"agent {reg.agent_id} changed concurrently")

    def waiting(self, run: Run, clients: int) -> Waiting | None:
        """What an elastic pool lacks for a step of ``clients``: the step waits until that
        many of its agents are live (fixed pools never wait here: their barrier does)."""
        config = self.pools.get(run.pool)
        if config is None or not config.elastic:
            return None
        now = self.now_ms()
        live = sum(1 for r in self.agents.all(run.pool) if r.live(now))
        return None if live >= clients else Waiting(needed=clients, live=live)

    def records(self, pool: str | None = None) -> list[AgentRecord]:
        return self.agents.all(pool)

    def admission_errors(
        self,
        *,
        pool: str,
        targets: Sequence[str],
        single_target: bool,
        engine: str,
        clients: int,
    ) -> list[FieldError]:
        return fleet_errors(
            pool=pool,
            targets=targets,
            single_target=single_target,
            engine=engine,
            clients=clients,
            config=self.pools.get(pool),
            records=self.agents.all(pool),
            now_ms=self.now_ms(),
        )

    def _capacity(self, config: PoolConfig) -> int | None:
        """An elastic pool's capacity as the scaler last asked for it (None: unknown)."""
        if not config.elastic or self.scaler is None:
            return None
        try:
            return self.scaler.capacity(config.name)
        except (BenchError, RuntimeError, ValueError) as e:  # the listing still answers
            log.warning("capacity of pool %s unknown: %s", config.name, e)
            return None

    def view(self, pool: str | None = None) -> AgentList:
        """GET /api/agents: every agent the registry knows and each pool's summary."""
        now = self.now_ms()
        records = sorted(self.agents.all(pool), key=lambda r: (r.pool, r.id))
        pools = [
            self._pool_view(name, config, [r for r in records if r.pool == name], now)
            for name, config in self.pools.items()
            if pool is None or name == pool
        ]
        return AgentList(agents=[AgentView.of(r, now) for r in records], pools=pools)

    def _pool_view(
        self, name: str, config: PoolConfig, mine: list[AgentRecord], now: int
    ) -> PoolView:
        """A pool's summary: its configuration, its agents now, their use and its cost."""
        used_s = sum(r.used_ms(now) for r in mine) / 1000
        live = sum(1 for r in mine if r.live(now))
        capacity = self._capacity(config)
        return PoolView(
            pool=name,
            elastic=config.elastic,
            size=config.declared_size,
            min=config.min if config.elastic else None,
            idle_s=config.idle if config.elastic else None,
            live=live,
            busy=sum(1 for r in mine if r.live(now) and r.state == "busy"),
            known=len(mine),
            used_s=round(used_s, 3),
            price_per_hour=config.price,
            cost=cost(used_s, config.price),
            capacity=capacity,
            missing=None if capacity is None else max(0, capacity - live),
        )
