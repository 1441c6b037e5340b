"""What the control plane costs in Azure, from its counted calls (issue 29.4): Cosmos DB
request units by operation, queue transactions and Function executions, per run of 1, 24
and 1,000 clients and per idle agent-hour, at the list prices of bench/prices.json (each
with where and when it was read; a price not read stays "n/a").

Counted, not guessed: a run of N clients goes through the real core services (intake,
protocol, lifecycle) over the in-memory ports (core.memory), with N simulated agents doing
what agent/worker.py does (tests/sim/agents.py: claim, ready, barrier polls, a heartbeat a
second while fio runs 10 s, the result); every database call is counted with the size of
what it read or wrote, every queue operation, and every API request (one Function
execution each). Request units per call follow Microsoft's point-read figures (1 KB: 1 RU,
100 KB: 10 RU); writes and queries are the assumptions prices.json names.

Flex Consumption on demand bills executions and GB-seconds: the instance's memory while it
executes. The GB-seconds are executions x ``--execution-ms`` x ``--instance-memory-mb``
(2,048 MB: bicep/modules/functionapp.bicep): an assumed duration, and an upper bound at it,
since executions that overlap on one instance are billed once. No free grant is taken off.

An idle agent-hour: bench/out/idle_polls.json's steady receives per hour (one queue
transaction each) and the registry heartbeat every 30 s (agent/config.py heartbeat_s), one
API request that reads and replaces the agent's document (core.fleet.service.register).

The 1,000-client run is counted whole, like the others (core.models.MAX_CLIENTS is 1,000);
``--extrapolate N`` adds a row for N clients from the largest counted run, per client.

Usage: .venv/bin/python -m bench.cost [--clients 1 24 1000] [--extrapolate N] Writes
bench/out/cost.json and prints the table (docs/performance.md, "What it costs").
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
OUT = HERE / "out"
WRITES = ("create", "replace", "upsert", "patch", "delete")
REGISTRY_BEAT_S = 30  # agent/config.py heartbeat_s
INSTANCE_MEMORY_MB = 2048  # bicep/modules/functionapp.bicep instanceMemoryMB
# About one request's time in the API here (a heartbeat's round trip 11.5-15.9 ms,
# docs/performance.md): assumed for Azure, where each database call crosses the network.
EXECUTION_MS = 20


# ---- pure arithmetic ----------------------------------------------------------------------


@dataclass(frozen=True)
class RuModel:
    """Request units of one call from the size it read or wrote (KB)."""

    read_1kb: float = 1.0
    read_100kb: float = 10.0
    write_1kb: float = 5.0
    query_minimum: float = 2.5
    query_per_kb: float = 1.0

    def point_read(self, kb: float) -> float:
        """Microsoft's two figures (1 KB: 1 RU; 100 KB: 10 RU), linear between them and
        beyond; a read of less than 1 KB costs what 1 KB does."""
        slope = (self.read_100kb - self.read_1kb) / 99
        return self.read_1kb + slope * max(0.0, kb - 1)

    def write(self, kb: float) -> float:
        return self.write_1kb * max(1.0, kb)

    def query(self, kb: float) -> float:
        return self.query_minimum + self.query_per_kb * kb

    def of(self, op: str, kb: float) -> float:
        if op == "read":
            return self.point_read(kb)
        if op == "query":
            return self.query(kb)
        if op in WRITES:
            return self.write(kb)
        raise ValueError(f"no request-unit rule for {op!r}")


@dataclass
class Counts:
    """What one run (or one idle agent-hour) made: database calls with their sizes, queue
    operations, API requests."""

    db: Counter[str] = field(default_factory=Counter)  # operation -> calls
    db_kb: list[tuple[str, float]] = field(default_factory=list)  # (operation, KB) per call
    queue: Counter[str] = field(default_factory=Counter)
    http_requests: int = 0

    def request_units(self, model: RuModel) -> float:
        return sum(model.of(op, kb) for op, kb in self.db_kb)


@dataclass(frozen=True)
class Prices:
    """USD; None: not read (the figure shows as n/a)."""

    per_million_ru: float | None = None
    per_10k_queue_ops: float | None = None
    per_million_executions: float | None = None
    per_gb_second: float | None = None


@dataclass(frozen=True)
class Execution:
    """What one Function execution holds: its instance's memory for its duration."""

    memory_mb: float = INSTANCE_MEMORY_MB
    duration_ms: float = EXECUTION_MS

    @property
    def gb_seconds(self) -> float:
        return self.memory_mb / 1024 * self.duration_ms / 1000


def usd(amount: float, price: float | None, per: float) -> float | None:
    """``amount`` units at ``price`` per ``per`` units; None when the price is unknown."""
    if price is None:
        return None
    if amount < 0 or per <= 0:
        raise ValueError("amounts are counts (>= 0) and prices are per a positive quantity")
    return amount * price / per


def costs(
    counts: Counts, model: RuModel, prices: Prices, execution: Execution = Execution()
) -> dict[str, float | None]:
    ru = counts.request_units(model)
    ops = sum(counts.queue.values())
    gb_s = counts.http_requests * execution.gb_seconds
    return {
        "request_units": ru,
        "queue_operations": float(ops),
        "executions": float(counts.http_requests),
        "gb_seconds": gb_s,
        "cosmos_usd": usd(ru, prices.per_million_ru, 1e6),
        "queue_usd": usd(ops, prices.per_10k_queue_ops, 1e4),
        "functions_usd": usd(counts.http_requests, prices.per_million_executions, 1e6),
        "functions_gb_s_usd": usd(gb_s, prices.per_gb_second, 1),
    }


def scale(counts: Counts, factor: float) -> Counts:
    """``counts`` times ``factor``: every call as often, each of the same size."""
    out = Counts()
    out.db = Counter({k: round(v * factor) for k, v in counts.db.items()})
    out.queue = Counter({k: round(v * factor) for k, v in counts.queue.items()})
    out.http_requests = round(counts.http_requests * factor)
    whole, part = int(factor), factor - int(factor)
    out.db_kb = counts.db_kb * whole + counts.db_kb[: round(len(counts.db_kb) * part)]
    return out


def idle_hour(receives_per_hour: float, beat_s: float, beat_read_kb: float) -> Counts:
    """An idle agent's hour: its queue receives, and its registry beats (a read and a
    replace of its record each, one API request)."""
    beats = math.floor(3600 / beat_s)
    c = Counts()
    c.queue["receive"] = round(receives_per_hour)
    c.http_requests = beats
    c.db["read"] = c.db["replace"] = beats
    c.db_kb = [("read", beat_read_kb), ("replace", beat_read_kb)] * beats
    return c


def load_prices(path: Path) -> tuple[Prices, RuModel, dict[str, Any]]:
    doc = json.loads(path.read_text())
    p, r = doc["prices"], doc["request_units"]
    prices = Prices(
        per_million_ru=p["cosmos_serverless_usd_per_million_ru"]["usd"],
        per_10k_queue_ops=p["queue_usd_per_10k_operations"]["usd"],
        per_million_executions=p["flex_usd_per_million_executions"]["usd"],
        per_gb_second=p["flex_usd_per_gb_second"]["usd"],
    )
    model = RuModel(
        read_1kb=r["point_read_1kb"]["ru"],
        read_100kb=r["point_read_100kb"]["ru"],
        write_1kb=r["write_1kb"]["ru"],
        query_minimum=r["query_minimum"]["ru"],
        query_per_kb=r["query_per_result_kb"]["ru"],
    )
    return prices, model, doc


# ---- counting a run (the in-memory ports and the simulated agents) -------------------------


def count_run(clients: int, runtime_s: int = 10) -> Counts:
    from bench.cost_count import counted_run  # the simulation: only when counting

    return counted_run(clients, runtime_s)


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:.6f}"


def rows(table: Mapping[str, dict[str, float | None]]) -> Iterator[str]:
    yield (
        "| what | RUs | queue ops | executions | GB-s | Cosmos DB | queue "
        "| Functions executions | Functions GB-s |"
    )
    yield "|---|---|---|---|---|---|---|---|---|"
    for name, c in table.items():
        cells = [
            f"{c['request_units']:,.0f}",
            f"{c['queue_operations']:,.0f}",
            f"{c['executions']:,.0f}",
            f"{c['gb_seconds']:,.2f}",
            _money(c["cosmos_usd"]),
            _money(c["queue_usd"]),
            _money(c["functions_usd"]),
            _money(c["functions_gb_s_usd"]),
        ]
        yield f"| {name} | " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None, count: Callable[[int], Counts] = count_run) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, nargs="+", default=[1, 24, 1000])
    p.add_argument("--extrapolate", type=int, default=0)
    p.add_argument("--prices", type=Path, default=HERE / "prices.json")
    p.add_argument("--idle", type=Path, default=OUT / "idle_polls.json")
    p.add_argument("--execution-ms", type=float, default=EXECUTION_MS)
    p.add_argument("--instance-memory-mb", type=float, default=INSTANCE_MEMORY_MB)
    a = p.parse_args(argv)
    prices, model, doc = load_prices(a.prices)
    execution = Execution(memory_mb=a.instance_memory_mb, duration_ms=a.execution_ms)
    table: dict[str, dict[str, float | None]] = {}
    counted: dict[str, Any] = {}
    count_cache: dict[int, Counts] = {}
    for n in a.clients:
        c = count_cache[n] = count(n)
        name = f"run of {n:,} client{'s' if n > 1 else ''}"
        table[name] = costs(c, model, prices, execution)
        counted[name] = {"db": dict(c.db), "queue": dict(c.queue), "http": c.http_requests}
        print(f"{name}: {json.dumps(counted[name])}", flush=True)
    if a.extrapolate > max(a.clients):
        # The largest counted run, per client, times the clients asked for.
        n = max(a.clients)
        scaled = scale(count_cache[n], a.extrapolate / n)
        name = f"{a.extrapolate:,} clients (from {n}, per client)"
        table[name] = costs(scaled, model, prices, execution)
    receives = json.loads(a.idle.read_text())["rows"][0]["steady_per_agent_hour"]
    idle = idle_hour(receives, REGISTRY_BEAT_S, beat_read_kb=1.0)
    table["idle agent-hour"] = costs(idle, model, prices, execution)
    OUT.mkdir(exist_ok=True)
    assumed = {"execution_ms": execution.duration_ms, "instance_memory_mb": execution.memory_mb}
    report = {"counted": counted, "costs": table, "prices": doc, "execution": assumed}
    (OUT / "cost.json").write_text(json.dumps(report, indent=2))
    print("\n".join(rows(table)))


if __name__ == "__main__":
    main()
