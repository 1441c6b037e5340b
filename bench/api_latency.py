"""API latency and throughput at 1, 8 and 32 callers (issue 17, points 6 and 8).

For a source tree (this one by default, or another checkout with ``--tree``), it starts
that tree's local stack with no agent, submits one run to read, and then for each caller
count runs for ``--seconds``:

- ``GET /api/runs/{id}``: every caller reads the same queued run in a loop;
- the same for a finished run (one cancelled before any agent took it: its view is kept);
- ``POST /api/runs``: every caller submits runs to a target of its own (the stack registers
  one per caller; a caller's runs wait behind its first, as a pipeline's on one volume).

Figures per operation and caller count: requests per second, p50/p99 latency, and the
answers that were not 2xx (a 500 here was the shared Cosmos client's race, issue 17.5).
Trees are measured one after the other with ``--rounds`` alternations when several are
given, so the machine's drift hits each alike: compare the ratios.
Usage: .venv/bin/python bench/api_latency.py [--tree PATH ...] [--callers 1 8 32]
[--seconds 10] [--rounds 1] [--out bench/out/api_latency.json]
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
RUN = {"rw": "randread", "bs": "4k", "size": "8m", "runtime": 5, "iodepth": 1}


def load(
    url: str, callers: int, seconds: float, op: str, run_id: str, done_id: str = ""
) -> dict[str, Any]:
    deadline = time.monotonic() + seconds

    def caller(k: int) -> tuple[list[float], int]:
        lat: list[float] = []
        bad = 0
        with httpx.Client(base_url=url, timeout=60) as api:
            while time.monotonic() < deadline:
                start = time.perf_counter()
                if op == "get":
                    r = api.get(f"/api/runs/{run_id}")
                elif op == "get_finished":
                    r = api.get(f"/api/runs/{done_id}")
                else:
                    body = {"target": f"c{k}", "workload": RUN}
                    r = api.post("/api/runs", json=body)
                lat.append((time.perf_counter() - start) * 1000)
                bad += r.status_code >= 300
        return lat, bad

    started = time.monotonic()
    with cf.ThreadPoolExecutor(callers) as pool:
        outs = list(pool.map(caller, range(callers)))
    wall = time.monotonic() - started
    lat = sorted(x for o in outs for x in o[0])
    return {
        "callers": callers,
        "requests": len(lat),
        "per_s": len(lat) / wall,
        "p50_ms": statistics.median(lat),
        "p99_ms": lat[int(0.99 * (len(lat) - 1))],
        "not_2xx": sum(o[1] for o in outs),
    }


def measure(tree: Path, callers: list[int], seconds: float) -> dict[str, Any]:
    python = str(tree / ".venv" / "bin" / "python")
    work = Path(tempfile.mkdtemp(prefix="bench-api-"))
    env = {**os.environ, "BENCH_LOCAL_DIR": str(work / "stack")}
    (work / "scratch").mkdir()
    up = [python, "-m", "benchctl", "local", "up", "--agents", "0"]
    up += ["--target", f"read-me={work / 'scratch'}", "--target", f"done={work / 'scratch'}"]
    for k in range(max(callers)):  # the registry refuses runs to targets it does not name
        up += ["--target", f"c{k}={work / 'scratch'}"]
    subprocess.run(up, cwd=tree, env=env, check=True, capture_output=True)
    state = json.loads((work / "stack" / "stack.json").read_text())
    url = f"http://127.0.0.1:{state['api_port']}"
    out: dict[str, Any] = {"tree": str(tree), "get": [], "get_finished": [], "post": []}
    try:
        with httpx.Client(base_url=url, timeout=60) as api:
            r = api.post("/api/runs", json={"target": "read-me", "workload": RUN})
            run_id = r.json()["id"]
            r = api.post("/api/runs", json={"target": "done", "workload": RUN})
            done_id = r.json()["id"]
            assert api.delete(f"/api/runs/{done_id}").status_code == 202
            for _ in range(20):  # warm the API's connections
                api.get(f"/api/runs/{run_id}")
        for n in callers:
            out["get"].append(load(url, n, seconds, "get", run_id))
            out["get_finished"].append(load(url, n, seconds, "get_finished", run_id, done_id))
            out["post"].append(load(url, n, seconds, "post", run_id))
    finally:
        down = [python, "-m", "benchctl", "local", "down"]
        subprocess.run(down, cwd=tree, env=env, capture_output=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path, nargs="+", default=[ROOT])
    parser.add_argument("--callers", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "api_latency.json")
    a = parser.parse_args()
    rounds = []
    for r in range(a.rounds):
        trees = a.tree if r % 2 == 0 else list(reversed(a.tree))
        rounds.append([measure(t.resolve(), a.callers, a.seconds) for t in trees])
    report = {"seconds": a.seconds, "note": "2 shared cores, other work running", "rounds": rounds}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=2))
    for tree_runs in rounds:
        for m in tree_runs:
            for op in ("get", "get_finished", "post"):
                for row in m[op]:
                    print(m["tree"], op, json.dumps(row))


if __name__ == "__main__":
    # Stopped with SIGTERM, as with Ctrl-C: its ``finally`` stops the stack it started.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    main()
