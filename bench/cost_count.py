"""One run of N clients through the real core services over the in-memory ports, with N
simulated agents (tests/sim), every storage call counted with its size (bench/cost.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from agent.config import AgentConfig
from bench.cost import Counts
from core.fleet.pools import PoolConfig
from core.memory import Effect
from core.memory.documents import Table
from core.models.document import StoredJson
from core.runs.barrier_timing import barrier_poll_ms
from core.runs.service import RunService
from tests.sim.agents import SimAgent
from tests.sim.world import POOL, World, simulated

RESULT = 3  # SimAgent.step's choice: its item ends with a result
WORKLOAD = {"rw": "randread", "bs": "4k", "size": "8m", "iodepth": 1}
# What the agent does, not the faults' simulation's short lease: its visibility timeout
# (renewed at half of it), and a round trip reported with ready (agent.api_client), which
# sizes the start lead; without one the lead is 1.5 s + 50 ms a client (51.5 s at 1,000
# clients, every client heartbeating through it: the count grew 4-5x per client).
VISIBILITY_S = AgentConfig(api_url="", queue_uri="").visibility_timeout
RTT_MS = 20  # about a heartbeat's round trip here (docs/performance.md: 11.5-15.9 ms)
# What a real agent uploads at the end of a 10 s run, its result carrying the rest (agent
# protocol 4): 10 s of real fio (randread 4k, iodepth 16, one client on the local stack,
# 2026-11-29 05:27 UTC) packed its timeline to 11,723 bytes (over 8 KiB) and its logs to
# 24,983 (over 16 KiB); its output (4,686) and counters (663) were carried. 30 s: 33,646
# and 69,882, uploaded too. 3 s of fio carries all four (tests/test_e2e.py).
UPLOADS_10S = ("timeline", "logs")


def uploads_for(runtime_s: int) -> tuple[str, ...]:
    """The artifacts an agent uploads for a run of ``runtime_s`` (4-9 s taken as 10 s's)."""
    return () if runtime_s <= 3 else UPLOADS_10S


def _kb(docs: StoredJson | list[StoredJson]) -> float:
    return len(json.dumps(docs, separators=(",", ":")).encode()) / 1024


def _sized(table: Table, counts: Counts) -> None:
    """Record each call's operation and the KB it read or wrote."""
    read, query = table.read, table.query
    writes = {op: getattr(table, op) for op in ("create", "replace", "upsert")}

    def sized_read(id_: str, pk: str) -> StoredJson:
        doc = read(id_, pk)
        counts.db_kb.append(("read", _kb(doc)))
        return doc

    def sized_query(keep: Callable[[StoredJson], bool], pk: str | None = None) -> list[StoredJson]:
        docs = query(keep, pk)
        counts.db_kb.append(("query", _kb(docs)))
        return docs

    def sized(op: str) -> Callable[..., StoredJson]:
        def write(doc: StoredJson, *rest: Any) -> StoredJson:
            counts.db_kb.append((op, _kb(doc)))
            out: StoredJson = writes[op](doc, *rest)
            return out

        return write

    table.read, table.query = sized_read, sized_query  # type: ignore[method-assign]
    for op in writes:
        setattr(table, op, sized(op))


def counted_run(
    clients: int, runtime_s: int = 10, uploads: tuple[str, ...] | None = None
) -> Counts:
    """``uploads``: what each agent uploads before its result (``uploads_for`` the run)."""
    world = World()
    counts = Counts()
    inner = world.faults

    def hook(op: str, table: str, key: str) -> Effect:
        if table == "queue":
            counts.queue[op] += 1
        elif table != "artifacts":
            counts.db[op] += 1
        return inner(op, table, key)

    world.store.tables.faults = hook
    world.queues.faults = hook
    for t in world.store.table.values():
        _sized(t, counts)
    config = PoolConfig(name=POOL, size=clients)
    service = RunService(
        world.store,
        world.queues,
        world.artifacts,
        clock=world.clock,
        pools=(POOL,),
        pool_configs=(config,),
    )
    world.apis = [service]
    calls = world.api_call

    def api_call(api: int, call: Any, crash_in: int | None) -> Any:
        counts.http_requests += 1
        return calls(api, call, crash_in)

    world.api_call = api_call  # type: ignore[method-assign]
    with simulated(world):
        body = {"pool": POOL, "target": "a", "clients": clients}
        body["workload"] = {**WORKLOAD, "runtime": runtime_s}
        run, _ = service.submit(body)
        counts.http_requests += 1  # the POST
        agents = [
            SimAgent(
                f"agent-{i}",
                visibility_s=VISIBILITY_S,
                rtt_ms=RTT_MS,
                as_agent=True,
                uploads=uploads_for(runtime_s) if uploads is None else uploads,
            )
            for i in range(clients)
        ]
        # Steps short enough for an agent to poll the barrier when it would (a lead of
        # barrier_poll_ms after the last ready), a whole number of them a second (its beats).
        step_s = 1 / math.ceil(1000 / barrier_poll_ms(clients))
        for _ in range(math.ceil((runtime_s * 10 + 600) / step_s)):
            for agent in agents:
                agent.step(world, 0, None, RESULT)
            world.clock.advance(step_s)
            # The loop looks at the stored document itself: not a call of the service's.
            final = world.store.table["runs"].docs[(run.id, run.id)]
            if final["finished"] and all(a.work is None for a in agents):
                break
    if final["state"] != "completed":
        raise RuntimeError(f"the counted run ended {final['state']}: {final.get('error')}")
    return counts
