"""Simulated clients in the local stack (simagent): ``benchctl local up --sim-agents N`` and
``benchctl local sim-agents N`` against a running stack.

They serve a pool of their own (``sim`` by default, declared with its size), never the
stack's ``default`` pool, so a run only reaches them when it asks for that pool: their
figures are declared, not measured. The stack's targets are registered in their pool too.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from adapters.queue import WorkQueues
from benchctl.localstack import Proc, Stack, _spawn

SIM_POOL = "sim"
PROC_PREFIX = "sim-agents-"  # the processes' names in the stack's state (never "agent-")


def sim_pool_spec(count: int, pool: str = SIM_POOL) -> str:
    """The pool as BENCH_POOLS declares it: its size is the simulated clients'."""
    return f"{pool}:size={count}"


def with_sim_targets(registry: str, pool: str = SIM_POOL) -> str:
    """BENCH_TARGETS with each target of the ``default`` pool registered in ``pool`` too."""
    entries: list[dict[str, Any]] = json.loads(registry)
    copies = [{**e, "pool": pool} for e in entries if e.get("pool", "default") == "default"]
    return json.dumps([*entries, *copies])


def start_sim_agents(
    stack: Stack,
    count: int,
    *,
    pool: str = SIM_POOL,
    iops: int = 1000,
    latency_us: float = 100.0,
    targets: list[str] | None = None,
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> Proc:
    """One process of ``count`` simulated clients, ``sim-<pool>-1`` ..., on ``pool``."""
    WorkQueues.connect(stack.queue_uri, local_emulators=True).ensure_pool(pool)
    argv = [sys.executable, "-m", "simagent", "--api-url", stack.api_url]
    argv += ["--queue-uri", stack.queue_uri, "--pool", pool, "--count", str(count)]
    argv += ["--prefix", f"sim-{pool}", "--iops", str(iops), "--latency-us", f"{latency_us:g}"]
    argv += ["--visibility-timeout", str(stack.visibility_timeout), "--retry-delay", "1"]
    argv += ["--heartbeat", str(stack.heartbeat_s)]
    for alias in stack.targets if targets is None else targets:
        argv += ["--target", alias]
    taken = sum(p.name.startswith(PROC_PREFIX + pool) for p in stack.procs)
    name = f"{PROC_PREFIX}{pool}" + (f"-{taken + 1}" if taken else "")
    return _spawn(stack, name, argv + (extra or []), {**stack.telemetry, **(env or {})}, pool=pool)


def sim_procs(stack: Stack) -> list[Proc]:
    return [p for p in stack.procs if p.name.startswith(PROC_PREFIX)]
