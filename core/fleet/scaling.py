"""Elastic pools (pure logic and the scaler port).

A pool declared with ``max`` in BENCH_POOLS is elastic: its client VMs exist only while runs
need them. The service (the timer) raises its capacity when the runs admitted to it ask for
more agents than it has, and a run's step is sent only once enough agents are live (the run
shows ``provisioning`` meanwhile, with the reason and how many agents are still missing), so
a step's start barrier never waits on a VM being created. After ``idle`` seconds with no
run admitted and no agent busy, the pool goes back to ``min``.

A :class:`PoolScaler` sets the capacity: in Azure the agents' scale set's (adapters/
azure_scaler.py, azure-mgmt-compute), locally agent processes (benchctl/local_scaler.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from core.fleet.pools import PoolConfig

PROVISION_TIMEOUT_S = 1800  # a pool that does not grow within this fails the run, saying so


class PoolScaler(Protocol):
    def capacity(self, pool: str) -> int: ...
    def set_capacity(self, pool: str, capacity: int) -> None: ...


@dataclass(frozen=True)
class Waiting:
    """A step held back until its pool has grown: why, and the agents still missing."""

    needed: int
    live: int

    @property
    def missing(self) -> int:
        return max(0, self.needed - self.live)

    def reason(self, pool: str) -> str:
        return (
            f"pool {pool} is growing to {self.needed} agents: {self.live} live, "
            f"{self.missing} still to register"
        )


def wanted_capacity(
    config: PoolConfig,
    *,
    demand: int,
    busy: int,
    current: int,
    idle_since_ms: int,
    now_ms: int,
) -> int | None:
    """The capacity to set now, or None to leave it.

    ``demand``: agents the pool's admitted, unfinished runs need at once; ``busy``: live
    agents holding an item; ``idle_since_ms``: since when there has been neither."""
    assert config.max is not None, "only elastic pools scale"
    if demand > current:
        grown = min(max(demand, config.min), config.max)
        return grown if grown > current else None  # never shrink a pool runs need
    if current < config.min:
        return config.min
    if demand == 0 and busy == 0 and current > config.min:
        if now_ms - idle_since_ms >= config.idle * 1000:
            return config.min
    return None
