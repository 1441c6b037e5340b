"""Intake and timer cost with a backlog: what one caller sees and what the idle service
costs, with no runs waiting and with many (issue 17, points 2 and 3).

For a source tree (this one by default, or another checkout with ``--tree``, e.g. an
older commit as the reference), it starts that tree's local stack with no agent and:

1. ``POST /api/runs`` one at a time (each to a target nobody holds): p50 and p95 latency,
   then throughput with 4 callers for 10 s (each caller to a target of its own, its runs
   waiting behind its first), on an empty service;
2. the same after ``--backlog`` runs were made to wait behind a held target;
3. the idle API's and Cosmos DB server's CPU over 20 s with that backlog (the timer ticks
   every second locally);
4. the idle CPU with ``--active`` queued runs of ``--active-clients`` clients each and no
   agent to take their items (the timer's cost growing with active runs x items).

CPU is the process's own user+system time (/proc/<pid>/stat) over wall time: 1.0 is one
core. Usage: .venv/bin/python bench/intake.py [--tree PATH] [--backlog 1000]
[--out bench/out/intake.json]. Run the reference and this tree one after the other on the
same machine and compare the ratios.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def process_tree(pid: int) -> list[int]:
    """The process and its descendants (node under its npm wrapper, uvicorn's workers)."""
    pids, frontier = [pid], [pid]
    while frontier:
        parent = frontier.pop()
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:
                continue
            if int(text.rsplit(")", 1)[1].split()[1]) == parent:
                child = int(stat.parent.name)
                pids.append(child)
                frontier.append(child)
    return pids


def cpu_shares(groups: dict[str, list[int]], seconds: float) -> dict[str, float]:
    """Each group's CPU over the same ``seconds`` of wall time, in cores."""
    before = {k: sum(cpu_seconds(p) for p in pids) for k, pids in groups.items()}
    time.sleep(seconds)
    return {
        k: (sum(cpu_seconds(p) for p in pids) - before[k]) / seconds for k, pids in groups.items()
    }


def body(target: str) -> dict[str, Any]:
    w = {"rw": "randread", "bs": "4k", "size": "8m", "runtime": 5, "iodepth": 1}
    return {"target": target, "workload": w, "tags": {"bench": "intake"}}


FREE = 240  # targets used once each by the one-at-a-time POSTs (warm 20, then 2 x 100)


def registry(scratch: Path, active: int) -> list[str]:
    """``--target`` flags: the stack's registry refuses runs to targets it does not name."""
    names = ["held", *(f"free{i}" for i in range(FREE)), *(f"thru{k}" for k in range(4))]
    names += [f"wide{i}" for i in range(active)]
    return [flag for n in names for flag in ("--target", f"{n}={scratch}")]


def post_latencies(api: httpx.Client, first: int, n: int) -> list[float]:
    out = []
    for i in range(first, first + n):
        start = time.perf_counter()
        r = api.post("/api/runs", json=body(f"free{i}"))
        out.append((time.perf_counter() - start) * 1000)
        assert r.status_code in (200, 202), r.text
    return out


def throughput(url: str, seconds: float, callers: int = 4) -> float:
    deadline = time.monotonic() + seconds

    def caller(k: int) -> int:
        done = 0
        with httpx.Client(base_url=url, timeout=60) as api:
            while time.monotonic() < deadline:
                r = api.post("/api/runs", json=body(f"thru{k}"))
                assert r.status_code < 300, r.text
                done += 1
        return done

    with cf.ThreadPoolExecutor(callers) as pool:
        return sum(pool.map(caller, range(callers))) / seconds


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_ms": statistics.median(ordered),
        "p95_ms": ordered[int(0.95 * (len(ordered) - 1))],
        "n": len(ordered),
    }


def measure(tree: Path, backlog: int, active: int, active_clients: int) -> dict[str, Any]:
    python = str(tree / ".venv" / "bin" / "python")
    work = Path(tempfile.mkdtemp(prefix="bench-intake-"))
    env = {**os.environ, "BENCH_LOCAL_DIR": str(work / "stack")}
    scratch = work / "scratch"
    scratch.mkdir()
    up = [python, "-m", "benchctl", "local", "up", "--agents", "0"]
    up += registry(scratch, active)
    subprocess.run(up, cwd=tree, env=env, check=True, capture_output=True)
    state = json.loads((work / "stack" / "stack.json").read_text())
    url = f"http://127.0.0.1:{state['api_port']}"
    api_pids = process_tree(next(p["pid"] for p in state["procs"] if p["name"] == "api"))
    cosmos_pids = process_tree(next(p["pid"] for p in state["procs"] if p["name"] == "cosmosdb"))
    out: dict[str, Any] = {"tree": str(tree)}
    try:
        with httpx.Client(base_url=url, timeout=120) as api:
            post_latencies(api, 0, 20)
            out["empty"] = summary(post_latencies(api, 20, 100))
            out["empty"]["per_s_4_callers"] = throughput(url, 10)
            groups = {"api": api_pids, "cosmos": cosmos_pids}
            out["idle_empty_cpu"] = cpu_shares(groups, 20)
            # One run holds "held"; the backlog waits behind it (no agent: it never ends).
            for _ in range(backlog + 1):
                r = api.post("/api/runs", json=body("held"))
                assert r.status_code == 202, r.text
            out["backlog"] = backlog
            out["with_backlog"] = summary(post_latencies(api, 120, 100))
            out["with_backlog"]["per_s_4_callers"] = throughput(url, 10)
            out["idle_backlog_cpu"] = cpu_shares(groups, 20)
            many = {**body("wide"), "clients": active_clients}
            for i in range(active):
                many["target"] = f"wide{i}"
                r = api.post("/api/runs", json=many)
                assert r.status_code == 202, r.text
            out["active_runs"] = {"runs": active, "clients": active_clients}
            out["idle_active_cpu"] = cpu_shares(groups, 20)
    finally:
        subprocess.run(
            [python, "-m", "benchctl", "local", "down"], cwd=tree, env=env, capture_output=True
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path, default=ROOT)
    parser.add_argument("--backlog", type=int, default=1000)
    parser.add_argument("--active", type=int, default=32)
    parser.add_argument("--active-clients", type=int, default=64)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "intake.json")
    a = parser.parse_args()
    figures = measure(a.tree.resolve(), a.backlog, a.active, a.active_clients)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
