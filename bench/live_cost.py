"""What the live view costs (issue 26.5): the agents' CPU with and without the live relay,
and the API requests per client per second, at 16 clients.

One local stack, two pools of N agents each on one tmpfs target: pool ``live`` relays fio's
status output with its heartbeats (the default), pool ``nolive`` runs with ``--no-live``.
Each pair of repetitions runs the same rate-capped step of N clients on both pools, in
alternating order (live first on even pairs), so the machine's drift hits both alike; the
idle pool's agents back off to a poll every 15 s meanwhile (``--idle-max 15``).

For each run, over the middle of its measured period (from 2 s after the step's start
instant to 1 s before its end: the relay only works while fio runs):

- agent CPU: the N agents' own CPU time (/proc/PID/stat utime + stime: every thread of the
  agent, not fio, its child), as a percentage of one core per agent;
- API requests: the uvicorn access log's lines in the window, per agent route, divided by
  clients and seconds;
- the API's and the Cosmos DB server's CPU over the same window (what the live documents'
  read and write per heartbeat cost the service; in Azure, request units).

Figures: per condition the median over pairs; the live relay's extra agent CPU, per pair
(live minus nolive, percentage points of a core per agent), and its median.
Usage: .venv/bin/python bench/live_cost.py [--clients 16] [--pairs 3] [--runtime 30]
Writes bench/out/live_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from adapters.cosmos import CosmosStore
from benchctl import localstack
from benchctl.localstack import Proc, Stack

OUT = Path(__file__).parent / "out"
POOLS = ("live", "nolive")
PROBE = "probe"  # no agent: the bench holds its item itself to time heartbeats
TICK = os.sysconf("SC_CLK_TCK")
ROUTE = re.compile(r'"(GET|POST|PUT) (/api/agent/[a-z]+)')


def cpu_s(pid: int) -> float:
    """A process's own CPU time (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def start(root: Path, clients: int, target: Path) -> Stack:
    stack = Stack(
        dir=str(root / "stack"),
        queue_port=localstack.free_port(),
        cosmos_port=localstack.free_port(),
        api_port=localstack.free_port(),
        blob_port=localstack.free_port(),
        pools=[f"{p}:size={clients}" for p in POOLS] + [f"{PROBE}:size=1"],
        visibility_timeout=30,
    )
    stack.save()
    localstack.start_emulators(stack)
    registry = [{"alias": "scratch", "pool": p} for p in (*POOLS, PROBE)]
    localstack.start_api(stack, 1.0, {"BENCH_TARGETS": json.dumps(registry)}, access_log=True)
    for pool in POOLS:
        extra = ["--idle-max", "15"] + (["--no-live"] if pool == "nolive" else [])
        for i in range(clients):
            localstack.start_agent(
                stack, f"{pool}-{i}", pool=pool, targets={"scratch": str(target)}, extra=extra
            )
    return stack


def workload(runtime: int, rate: int) -> dict[str, Any]:
    return {
        "rw": "randread",
        "bs": "4k",
        "size": "16m",
        "runtime": runtime,
        "iodepth": 1,
        "rate_iops": rate,
    }


def one_run(
    api: httpx.Client, stack: Stack, pool: str, clients: int, runtime: int, rate: int
) -> dict[str, Any]:
    body = {
        "target": "scratch",
        "pool": pool,
        "clients": clients,
        "workload": workload(runtime, rate),
    }
    run_id = api.post("/api/runs", json=body).raise_for_status().json()["id"]
    start_ms = None
    while start_ms is None:
        run = api.get(f"/api/runs/{run_id}").json()
        if run["state"] in ("failed", "cancelled"):
            raise RuntimeError(f"run {run_id}: {run['state']}: {run.get('error')}")
        start_ms = (run.get("steps") or [{}])[0].get("start_at_ms")
        time.sleep(0.2)
    agents = [p for p in stack.procs if p.name.startswith(f"agent-{pool}-")]
    services = {
        name: [p for p in stack.procs if p.name.startswith(name)] for name in ("api", "cosmosdb")
    }
    api_log = next(p for p in stack.procs if p.name == "api").log
    t0, t1 = start_ms / 1000 + 2, start_ms / 1000 + runtime - 1
    time.sleep(max(0.0, t0 - time.time()))
    before = snapshot(agents, services, api_log)
    time.sleep(max(0.0, t1 - time.time()))
    after = snapshot(agents, services, api_log)
    window = after["t"] - before["t"]
    with open(api_log, "rb") as f:
        f.seek(before["log"])
        lines = f.read(after["log"] - before["log"]).decode(errors="replace")
    routes = Counter(m.group(2) for m in ROUTE.finditer(lines))
    while api.get(f"/api/runs/{run_id}").json()["state"] not in ("completed", "failed"):
        time.sleep(0.5)
    run = api.get(f"/api/runs/{run_id}").json()
    if run["state"] != "completed":
        raise RuntimeError(f"run {run_id}: {run['state']}: {run.get('error')}")
    live = api.get(f"/api/runs/{run_id}/live").json()
    return {
        "pool": pool,
        "run_id": run_id,
        "window_s": round(window, 2),
        "agent_cpu_pct_per_agent": round(
            100 * (after["agents"] - before["agents"]) / window / clients, 3
        ),
        "api_cpu_pct": round(100 * (after["api"] - before["api"]) / window, 2),
        "cosmos_cpu_pct": round(100 * (after["cosmosdb"] - before["cosmosdb"]) / window, 2),
        "agent_requests_per_client_s": round(sum(routes.values()) / window / clients, 3),
        # What carries the live samples (the rest: the registry's beat every 30 s).
        "heartbeats_per_client_s": round(routes["/api/agent/heartbeat"] / window / clients, 3),
        "requests_by_route": dict(routes),
        "live_clients_shown": len(live["clients"]),
        "iops": sum(i["result"]["read"]["iops"] for i in run["items"]),
    }


def beat_latency(
    api: httpx.Client, stack: Stack, rounds: int = 10, each: int = 10
) -> dict[str, float]:
    """A heartbeat's round trip with one live sample and without, alternated in blocks, from
    an item this bench holds (in a pool no agent serves): what the live document's read and
    write add to each beat."""
    body = {"target": "scratch", "pool": PROBE, "workload": workload(3600, 100)}
    run_id = api.post("/api/runs", json=body).raise_for_status().json()["id"]
    item_id = f"{run_id}.s0.c0"
    store = CosmosStore.from_settings(stack.settings())
    work = store.items.get_item(run_id, item_id).work_item.model_dump(mode="json")
    claim = {"work_item": work, "agent_id": "probe", "dequeue_count": 1}
    api.post("/api/agent/claim", json=claim).raise_for_status()
    ref = {"run_id": run_id, "item_id": item_id, "agent_id": "probe"}
    api.post("/api/agent/ready", json=ref).raise_for_status()
    times: dict[str, list[float]] = {"with": [], "without": []}
    end_ms = int(time.time() * 1000)
    for r in range(rounds):
        for kind in ("with", "without") if r % 2 == 0 else ("without", "with"):
            for _ in range(each):
                end_ms += 1000
                sample = {"end_ms": end_ms, "dur_ms": 1000, "read": {"ios": 1, "bytes": 4096}}
                beat = {**ref, "live": [sample]} if kind == "with" else ref
                t = time.perf_counter()
                api.post("/api/agent/heartbeat", json=beat).raise_for_status()
                times[kind].append(time.perf_counter() - t)
    api.delete(f"/api/runs/{run_id}")
    return {f"{k}_ms_median": round(1000 * statistics.median(v), 1) for k, v in times.items()}


def snapshot(agents: list[Proc], services: dict[str, list[Proc]], log: str) -> dict[str, Any]:
    return {
        "t": time.time(),
        "agents": sum(cpu_s(p.pid) for p in agents),
        **{name: sum(cpu_s(p.pid) for p in procs) for name, procs in services.items()},
        "log": Path(log).stat().st_size,
    }


def measure(
    a: argparse.Namespace, target: Path, root: Path
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The runs, in pairs (each pool once, the order alternating), and the heartbeats'
    round trip; the stack is stopped whatever happens."""
    rows: list[dict[str, Any]] = []
    stack = start(root, a.clients, target)
    try:
        with httpx.Client(base_url=stack.api_url, timeout=60) as api:
            for pool in POOLS:  # lays out every client's files; not counted
                one_run(api, stack, pool, a.clients, 5, a.rate)
            for pair in range(a.pairs):
                order = POOLS if pair % 2 == 0 else POOLS[::-1]
                for pool in order:
                    row = one_run(api, stack, pool, a.clients, a.runtime, a.rate)
                    rows.append({"pair": pair, **row})
                    print(json.dumps(row), flush=True)
            beats = beat_latency(api, stack)
            print(json.dumps(beats), flush=True)
    finally:
        localstack.down(Path(stack.dir))
    return rows, beats


def _of(rows: list[dict[str, Any]], pair: int, pool: str) -> float:
    return float(
        next(r for r in rows if r["pair"] == pair and r["pool"] == pool)["agent_cpu_pct_per_agent"]
    )


def report_of(
    a: argparse.Namespace,
    rows: list[dict[str, Any]],
    beats: dict[str, float],
    load: tuple[float, ...],
) -> dict[str, Any]:
    def median(pool: str, key: str) -> float:
        return float(statistics.median(float(r[key]) for r in rows if r["pool"] == pool))

    extra = [_of(rows, k, "live") - _of(rows, k, "nolive") for k in range(a.pairs)]
    keys = (
        "agent_cpu_pct_per_agent",
        "agent_requests_per_client_s",
        "heartbeats_per_client_s",
        "api_cpu_pct",
        "cosmos_cpu_pct",
        "iops",
    )
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_before": [round(x, 2) for x in load],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "cores": os.cpu_count(),
        "clients": a.clients,
        "runtime_s": a.runtime,
        "rate_iops_per_client": a.rate,
        "median": {pool: {k: median(pool, k) for k in keys} for pool in POOLS},
        "extra_agent_cpu_pct_points_per_pair": [round(x, 3) for x in extra],
        "extra_agent_cpu_pct_points_median": round(statistics.median(extra), 3),
        "heartbeat_round_trip": beats,
        "runs": rows,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--runtime", type=int, default=30)
    p.add_argument("--rate", type=int, default=500, help="rate_iops per client")
    p.add_argument("--out", type=Path, default=OUT / "live_cost.json")
    a = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="live-cost-"))
    target = root / "tmpfs"
    target.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1g", "tmpfs", str(target)], check=True)
    load = os.getloadavg()
    try:
        rows, beats = measure(a, target, root)
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)
        shutil.rmtree(root, ignore_errors=True)
    report = report_of(a, rows, beats, load)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    # Stopped with SIGTERM, as with Ctrl-C: its ``finally`` stops the stack it started.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    main()
