"""The timer's part of elastic pools: each tick, set each elastic pool's capacity to what
its admitted runs need, and back to its minimum once it has been idle long enough
(core.fleet.scaling.wanted_capacity).

How long a pool has been idle is kept in memory: a restarted timer (a new Functions
instance) counts the idle period again from its start, so it shrinks a pool later, never
earlier.
"""

from __future__ import annotations

import logging

from core.fleet.scaling import PoolScaler, wanted_capacity
from core.fleet.service import Fleet
from core.ports import RunRepo

log = logging.getLogger(__name__)


class Autoscaler:
    def __init__(self, fleet: Fleet, runs: RunRepo, scaler: PoolScaler) -> None:
        self.fleet = fleet
        self.runs = runs
        self.scaler = scaler
        self._idle_since: dict[str, int] = {}

    def tick(self) -> dict[str, int]:
        """The capacities changed, by pool."""
        now = self.fleet.now_ms()
        changed = {}
        for config in self.fleet.pools.values():
            if not config.elastic:
                continue
            pool = config.name
            demand = sum(max(r.request.client_steps) for r in self.runs.active(pool))
            busy = sum(1 for a in self.fleet.records(pool) if a.live(now) and a.state == "busy")
            if demand or busy or pool not in self._idle_since:
                self._idle_since[pool] = now
            current = self.scaler.capacity(pool)
            wanted = wanted_capacity(
                config,
                demand=demand,
                busy=busy,
                current=current,
                idle_since_ms=self._idle_since[pool],
                now_ms=now,
            )
            if wanted is not None and wanted != current:
                log.info("pool %s: capacity %d -> %d (demand %d)", pool, current, wanted, demand)
                self.scaler.set_capacity(pool, wanted)
                changed[pool] = wanted
        return changed
