"""The control plane with 10, 100 and 1,000 clients (issue 29.2): simulated clients
(simagent) on the local stack, one run of N clients each, measured from outside.

For each N it starts a fresh stack with N simulated clients on pool ``sim`` (each declaring
``--iops`` I/Os per second of ``--latency-us``), counts every call to Cosmos DB, the
queues and Blob Storage (adapters.counting, BENCH_COUNT_CALLS, in the API and the clients)
and every request of the clients to the API, submits one run of N clients and reports:

- ``intake_s``: from the POST to the N-th work item sent to the queue (the calls' log);
  ``post_answered_s``: the POST's own answer;
- ``skew_ms``: each client's start instant (simagent.client: the step's instant when it
  heard "go" in time, else when it heard it) less the step's instant, p50/p99/max;
  ``heard_late_ms`` the same for hearing "go", ``sim_wake_ms`` the simulator's own wake-up
  delay (not the control plane's);
- ``io_end_to_completed_s``: from the latest measured end of a client (its result's
  ``ended_at_ms``) to the run seen ``completed`` (read every 50 ms from Cosmos DB by this
  process, whose calls are not counted): what a user waits once the I/O is over;
- ``last_result_to_completed_s``: from the last client's call to store its result (its
  wait for a fleet's thread included) to completed. It depends on when the clients call:
  those that upload their artifacts first call later, behind their uploads, and a burst
  of results sent at once (agent protocol 4) is all waited for from its last call;
  ``last_stored_to_completed_s``: the same from the service's storing of the last result
  (the latest item's ``ended_at``, the API's clock): the finalizer's part alone, without
  the results queued before the last one; ``results_per_s``: the results stored per second
  from the first client's call to store one to the last stored (how fast the burst drains);
- ``aggregation_s``, ``aggregation_peak_mib``: the timer's aggregation (core.runs.finalize's
  ``timelines`` and ``build_aggregates``) run again here on the stored run, under
  tracemalloc;
- ``db_calls``, ``queue``, ``blob``: per client, from the POST to completed; ``http_requests``:
  the clients' requests to the API per client; ``idle``: the same per client per hour with
  every client idle (measured over ``--idle-s`` before the POST);
- ``aggregate_iops`` against ``expected_iops`` (N x iops): the figures are known exactly.

The simulated fleet spreads its registry beats and held items' heartbeats to at most
``--registry-beats-per-s`` and ``--item-beats-per-s`` in all (simagent.fleet); the API runs
as ``--api-instances`` processes behind nginx. The settings are written beside the figures.

Usage: .venv/bin/python bench/scale.py [--clients 10 100 1000] [--runtime 3]
           [--api-instances N] [--visibility-timeout S] [--queue-timeout S]
Writes bench/out/scale.json (merged by client count) and prints a line per N.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import tempfile
import time
import tracemalloc
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.counting import SETTING, per_client, read_calls
from benchctl import localstack
from benchctl.local_sim import SIM_POOL, sim_pool_spec, start_sim_agents, with_sim_targets
from core.analysis.step_aggregates import build_aggregates
from core.errors import NotFound
from core.models import MAX_CLIENTS
from core.runs.finalize import timelines
from simagent.fleet import FLEET_ITEM_BEATS_PER_S, FLEET_REGISTRY_BEATS_PER_S

OUT = Path(__file__).parent / "out" / "scale.json"


def pct(values: list[float], p: float) -> float:
    """The p-th percentile, nearest rank (no interpolation)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": math.nan, "p99": math.nan, "max": math.nan}
    return {"p50": pct(values, 50), "p99": pct(values, 99), "max": max(values)}


@dataclass
class Followed:
    """One run, in Unix seconds: its POST, the answer, its first step marked sent (its
    items all on the queue, as the service records it), the run seen completed."""

    run_id: str
    clients: int
    post: float
    answered: float
    enqueued: float | None = None
    done: float | None = None


def follow(store: CosmosStore, runs: list[Followed], timeout: float) -> None:
    """Read the runs from Cosmos DB every 50 ms until each has completed (this process's
    calls are not counted): one read of the step, one of the run."""
    deadline = time.monotonic() + timeout
    while any(f.done is None for f in runs):
        for f in runs:
            if f.enqueued is None:
                with contextlib.suppress(NotFound):
                    if store.items.get_step(f.run_id, 0).enqueued:
                        f.enqueued = time.time()
            if f.done is None:
                run = store.runs.get(f.run_id)
                if run.state in ("failed", "cancelled"):
                    raise RuntimeError(f"run {f.run_id}: {run.state}: {run.error}")
                if run.state == "completed":
                    f.done = time.time()
        if time.monotonic() > deadline:
            raise RuntimeError(f"runs not done after {timeout} s")
        time.sleep(0.05)


def split_runs(n: int, most: int = MAX_CLIENTS) -> list[int]:
    """N clients as runs of at most MAX_CLIENTS each, as even as can be."""
    k = math.ceil(n / most)
    return [n // k + (1 if i < n % k else 0) for i in range(k)]


def submit(api_url: str, sizes: list[int], runtime: int, barrier_s: int) -> list[Followed]:
    """One run per size, each on a target of its own, all POSTed at once."""

    def post(i: int) -> Followed:
        body = {
            "target": f"scratch-{i + 1}",
            "pool": SIM_POOL,
            "clients": sizes[i],
            "workload": {"rw": "randread", "bs": "4k", "size": "8m", "runtime": runtime},
            "barrier_timeout_s": barrier_s,
            "tags": {"bench": "scale"},
        }
        with httpx.Client(base_url=api_url, timeout=300) as api:
            t_post = time.time()
            r = api.post("/api/runs", json=body)
            answered = time.time()
        r.raise_for_status()
        return Followed(r.json()["id"], sizes[i], t_post, answered)

    with ThreadPoolExecutor(len(sizes)) as pool:
        return list(pool.map(post, range(len(sizes))))


def wait_registered(api: httpx.Client, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        agents = api.get("/api/agents", params={"pool": SIM_POOL}).json().get("agents", [])
        if sum(a.get("status") == "live" for a in agents) >= n:
            return
        time.sleep(1)
    raise RuntimeError(f"the {n} simulated clients did not all register in {timeout:.0f} s")


def aggregation(store: CosmosStore, blobs: BlobArtifacts, run_id: str) -> dict[str, Any]:
    """The timer's aggregation of the stored run, again, timed and traced."""
    run = store.runs.get(run_id)
    steps, items = store.items.of_run(run_id)
    tracemalloc.start()
    t0 = time.perf_counter()
    results = store.results.of_run(run_id)
    found = timelines(blobs, run_id, results)
    aggs = build_aggregates(run, steps, items, results, found, now_ms=int(time.time() * 1000))
    seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    read = aggs[0].read if aggs else None
    return {
        "aggregation_s": round(seconds, 3),
        "aggregation_peak_mib": round(peak / 2**20, 2),
        "aggregate_iops": read.iops if read else None,
        "aggregate_p99_ns": read.clat_ns.p99 if read else None,
    }


def measure(n: int, a: argparse.Namespace, root: Path) -> dict[str, Any]:
    directory = root / f"scale-{n}"
    calls = directory / "calls.log"
    records = directory / "records.jsonl"
    directory.mkdir(parents=True, exist_ok=True)
    sizes = split_runs(n)
    targets = {f"scratch-{i}": str(directory / f"scratch-{i}") for i in range(1, len(sizes) + 1)}
    registry = json.dumps([{"alias": t, "pool": "default"} for t in targets])
    stack = localstack.up(
        agents=0,
        targets=targets,
        directory=directory / "stack",
        fresh=True,
        api_env={"BENCH_TARGETS": with_sim_targets(registry), SETTING: str(calls)},
        extra_pools=[sim_pool_spec(n)],
        api_instances=a.api_instances,
        visibility_timeout=a.visibility_timeout,
    )
    try:
        idle_max = max(0.25, n / a.polls_per_s)  # the fleet polls the queue this often idle
        extra = ["--records", str(records), "--threads", str(min(n, a.threads))]
        extra += ["--idle-max", f"{idle_max:g}", "--queue-timeout", str(a.queue_timeout)]
        extra += ["--registry-beats-per-s", f"{a.registry_beats_per_s:g}"]
        extra += ["--item-beats-per-s", f"{a.item_beats_per_s:g}"]
        env = {SETTING: str(calls)}
        start_sim_agents(stack, n, iops=a.iops, latency_us=a.latency_us, extra=extra, env=env)
        settings = stack.settings()
        store = CosmosStore.from_settings(settings)
        blobs = BlobArtifacts.connect(settings.blob_uri, local_emulators=True)
        with httpx.Client(base_url=stack.api_url, timeout=120) as api:
            wait_registered(api, n, timeout=60 + n * 0.2)
        time.sleep(2)  # let the registrations' burst pass
        idle = (time.time(), time.time() + a.idle_s)
        time.sleep(a.idle_s)
        runs = submit(stack.api_url, sizes, a.runtime, a.barrier_timeout)
        follow(store, runs, a.timeout)
        return _figures(n, a, (calls, records), runs, idle, store, blobs)
    finally:
        localstack.down(directory / "stack")


def wait_records(path: Path, run_ids: set[str], n: int) -> list[dict[str, Any]]:
    """The clients' records of the runs, written when the API answered their results."""
    deadline = time.monotonic() + 60
    while True:
        recs = [json.loads(x) for x in path.read_text().splitlines()]
        done = [r for r in recs if r["run_id"] in run_ids and r["outcome"] == "completed"]
        if len(done) >= n:
            return done
        if time.monotonic() > deadline:
            outcomes = Counter((r["outcome"], r["reason"][:60]) for r in recs)
            raise RuntimeError(f"{len(done)} of {n} clients completed: {outcomes}")
        time.sleep(0.5)


def client_figures(done: list[dict[str, Any]]) -> dict[str, Any]:
    starts = [float(r["start_ms"] - r["start_at_ms"]) for r in done]
    heard = [float(max(0, r["heard_ms"] - r["start_at_ms"])) for r in done]
    woke = [float(r["woke_ms"] - r["start_at_ms"]) for r in done]
    return {"skew_ms": spread(starts), "heard_late_ms": spread(heard), "sim_wake_ms": spread(woke)}


def _one_run(
    f: Followed, done: list[dict[str, Any]], store: CosmosStore, blobs: BlobArtifacts
) -> dict[str, float]:
    assert f.enqueued is not None and f.done is not None, "followed to the end"
    mine = [r for r in done if r["run_id"] == f.run_id]
    last = max(r["result_sent_ms"] for r in mine) / 1000
    first = min(r["result_sent_ms"] for r in mine) / 1000
    _, items = store.items.of_run(f.run_id)
    ended = [i.ended_at for i in items if i.ended_at is not None]
    stored = max(datetime.fromisoformat(e.replace("Z", "+00:00")).timestamp() for e in ended)
    io_end = max(r.ended_at_ms for r in store.results.of_run(f.run_id)) / 1000
    agg = aggregation(store, blobs, f.run_id)
    return {
        "intake_s": f.enqueued - f.post,
        "post_answered_s": f.answered - f.post,
        "io_end_to_completed_s": f.done - io_end,
        "last_result_to_completed_s": f.done - last,
        "last_stored_to_completed_s": f.done - stored,
        "results_per_s": len(mine) / max(stored - first, 1e-3),
        "done": f.done,
        "aggregation_s": agg["aggregation_s"],
        "aggregation_peak_mib": agg["aggregation_peak_mib"],
        "aggregate_iops": agg["aggregate_iops"] or 0.0,
        "aggregate_p99_ns": agg["aggregate_p99_ns"] or 0.0,
    }


def _run_figures(
    runs: list[Followed], done: list[dict[str, Any]], store: CosmosStore, blobs: BlobArtifacts
) -> dict[str, Any]:
    """Per run, then the worst (times) or the sum (IOPS, aggregation time) over the runs."""
    each = [_one_run(f, done, store, blobs) for f in runs]

    def worst(key: str) -> float:
        return round(max(e[key] for e in each), 3)

    def total(key: str) -> float:
        return round(sum(e[key] for e in each), 3)

    return {
        "intake_s": worst("intake_s"),
        "post_answered_s": worst("post_answered_s"),
        "io_end_to_completed_s": worst("io_end_to_completed_s"),
        "last_result_to_completed_s": worst("last_result_to_completed_s"),
        "last_stored_to_completed_s": worst("last_stored_to_completed_s"),
        "results_per_s": round(min(e["results_per_s"] for e in each), 1),
        "post_to_completed_s": round(worst("done") - runs[0].post, 3),
        "aggregation_s": total("aggregation_s"),
        "aggregation_peak_mib": worst("aggregation_peak_mib"),
        "aggregate_iops": total("aggregate_iops"),
        "aggregate_p99_ns": worst("aggregate_p99_ns"),
    }


def _figures(
    n: int,
    a: argparse.Namespace,
    paths: tuple[Path, Path],
    runs: list[Followed],
    idle: tuple[float, float],
    store: CosmosStore,
    blobs: BlobArtifacts,
) -> dict[str, Any]:
    done = wait_records(paths[1], {f.run_id for f in runs}, n)
    calls = read_calls(paths[0])
    first = min(f.post for f in runs)
    window = (first, max(f.done or 0 for f in runs))
    sends = sorted(t for t, _, s, op in calls if s == "queue" and op == "send" and t >= first)
    return {
        "clients": n,
        "runs": len(runs),
        "clients_per_run": [f.clients for f in runs],
        **_run_figures(runs, done, store, blobs),
        "nth_send_s": round(sends[n - 1] - first, 3) if len(sends) >= n else None,
        **client_figures(done),
        "expected_iops": n * a.iops,
        **per_client(calls, window, n),
        "idle_per_client_hour": per_client(calls, idle, n, 3600 / (idle[1] - idle[0])),
        "runtime_s": a.runtime,
        "settings": settings_of(a),
        "load": os.getloadavg()[0],
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def settings_of(a: argparse.Namespace) -> dict[str, float]:
    """What the figures were taken with, beside them."""
    keys = "api_instances visibility_timeout queue_timeout threads polls_per_s"
    keys += " registry_beats_per_s item_beats_per_s barrier_timeout"
    return {k: getattr(a, k) for k in keys.split()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--clients", type=int, nargs="+", default=[10, 100])
    p.add_argument("--runtime", type=int, default=3, help="each client's measured seconds")
    p.add_argument("--iops", type=int, default=1000)
    p.add_argument("--latency-us", type=float, default=100.0)
    p.add_argument("--threads", type=int, default=128, help="the fleet's calling threads")
    p.add_argument(
        "--polls-per-s", type=float, default=50.0, help="idle queue polls, all clients (Azurite)"
    )
    p.add_argument("--idle-s", type=float, default=5.0)
    p.add_argument(
        "--api-instances", type=int, default=1, help="API processes behind nginx (local up)"
    )
    p.add_argument("--visibility-timeout", type=int, default=30, help="the stack's, s")
    p.add_argument("--queue-timeout", type=int, default=3, help="clients' queue read timeout")
    p.add_argument(
        "--registry-beats-per-s",
        type=float,
        default=FLEET_REGISTRY_BEATS_PER_S,
        help="registry beats, all clients together",
    )
    p.add_argument(
        "--item-beats-per-s",
        type=float,
        default=FLEET_ITEM_BEATS_PER_S,
        help="held items' heartbeats, all clients together",
    )
    p.add_argument(
        "--barrier-timeout",
        type=int,
        default=300,
        help="the run's barrier_timeout_s: a "
        "thousand idle clients take a while to find their items (each polls every n/50 s)",
    )
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--work", type=Path, help="keep the stacks, logs and calls here")
    a = p.parse_args()
    kept: dict[str, Any] = json.loads(a.out.read_text()) if a.out.exists() else {}
    with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
        for n in a.clients:
            try:
                fig = measure(n, a, a.work or Path(tmp))
            except RuntimeError as e:  # a run that failed is a figure too: say why, dated
                fig = {"clients": n, "error": str(e)[:500], "load": os.getloadavg()[0]}
                fig |= {"date": datetime.now(UTC).isoformat(timespec="seconds")}
                fig |= {"settings": settings_of(a)}
            kept[str(n)] = fig
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.write_text(json.dumps(kept, indent=2, sort_keys=True) + "\n")
            print(json.dumps(fig))


if __name__ == "__main__":
    # Stopped with SIGTERM, as with Ctrl-C: its ``finally`` stops the stack it started.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    main()
