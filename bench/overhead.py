"""fio through the service against raw fio with the same job, alternated; and the fixed cost
of one step from request to ``completed`` (issue 17, points 4 and 7).

For each client count, the local stack runs with that many agents and one target. Each
repetition runs the same workload twice, in alternating order (raw first on even
repetitions, the service first on odd ones), so the machine's drift hits both alike:

- raw: N ``fio`` processes at once, each with the job file the agent writes
  (core.engines.fio_job.job_file, without the start FIFO), on the same mount, with the
  stack's agents stopped (SIGSTOP) meanwhile, as on a VM without the agent; each in a
  session of its own, as the agents' are (one scheduling group each, issue 29.3);
- service: ``POST /api/runs`` with ``clients`` N, then ``GET`` once, none until fio
  should be done, and every 50 ms after, until completed.

Figures: the ratio of the service's summed IOPS to raw fio's, per repetition (median and
how many repetitions the service was lower); per service run, request to the first I/O
(the step's start instant plus the client's measured skew, minus the POST's send time),
the part of it before the step's common start instant (queue poll, claim, layout, barrier),
from the last client's measured period's end (``ended_at_ms``: the end of its last whole
1 s log interval, up to a second before fio exits) to the run seen ``completed``, and from
the last item's result stored to the run's completing write (both the API's clock).

The target is a tmpfs directory with buffered I/O by default: fio is CPU-bound there, so
whatever the agent does on the same cores while fio measures shows in the ratio; and so
does what the local API, Cosmos DB server and Azurite do, which in Azure run elsewhere:
``--services-aside`` gives them the lowest CPU weight, as a model of a client VM.
Usage: .venv/bin/python bench/overhead.py [--clients 1 4] [--repeat 5] [--runtime 10]
Writes bench/out/overhead.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from agent.fio_clock import fio_clock
from benchctl import localstack
from core.engines.fio_job import job_file
from core.models import Workload

OUT = Path(__file__).parent / "out"


@contextlib.contextmanager
def agents_paused(stack: localstack.Stack) -> Iterator[None]:
    """Raw fio runs on a VM without the agent: the idle agents (polling the queue 4 times a
    second, and the queue service answering) are stopped while it runs."""
    pids = [p.pid for p in stack.agents()]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def raw_fio(workload: Workload, n: int, mount: Path, work: Path, tag: str) -> float:
    """N fio processes at once, each with its own files on the mount; their summed IOPS."""
    procs, outputs = [], []
    for i in range(n):
        data = mount / "raw" / f"c{i}"
        data.mkdir(parents=True, exist_ok=True)
        job = work / f"{tag}-{i}.fio"
        job.write_text(
            job_file(
                workload,
                directories={"scratch": str(data)},
                log_prefix=str(work / tag),
                clocksource=fio_clock("fio"),  # the agents' job names it (agent.fio_clock)
            )
        )
        out = work / f"{tag}-{i}.json"
        outputs.append(out)
        argv = ["fio", "--output-format=json", f"--output={out}", str(job)]
        # A session of its own, as each agent's fio has (each agent is started in one):
        # with the kernel's autogroup, one scheduling group each, not one shared by all N.
        procs.append(
            subprocess.Popen(argv, cwd=work, stdout=subprocess.DEVNULL, start_new_session=True)
        )
    for p in procs:
        if p.wait(workload.runtime + 120) != 0:
            raise RuntimeError(f"raw fio exited {p.returncode}")
    total = 0.0
    for out in outputs:
        doc = json.loads(out.read_text())
        total += sum(j["read"]["iops"] + j["write"]["iops"] for j in doc["jobs"])
    return total


def _ms(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000


def service(api: httpx.Client, workload: Workload, n: int) -> dict[str, float]:
    body = {"target": "scratch", "clients": n, "workload": workload.model_dump()}
    sent_ms = time.time() * 1000
    r = api.post("/api/runs", json=body)
    r.raise_for_status()
    run_id = r.json()["id"]
    # Not while fio measures: every GET costs the API and the database CPU on the cores fio
    # runs on (polling every 50 ms throughout took 8 % off 4 clients' IOPS). Nothing until
    # fio should be done, then every 50 ms to time the end.
    deadline = time.monotonic() + workload.runtime + 300
    fast_from = time.monotonic() + workload.ramp_time + workload.runtime
    while True:
        run = api.get(f"/api/runs/{run_id}").json()
        if run["state"] in ("completed", "failed", "cancelled"):
            seen_ms = time.time() * 1000
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} did not finish")
        time.sleep(max(0.05, fast_from - time.monotonic()))
    if run["state"] != "completed":
        raise RuntimeError(f"run {run_id}: {run['state']}: {run.get('error')}")
    results = [i["result"] for i in run["items"]]
    starts = [r["start"] for r in results]
    scheduled = starts[0]["scheduled_ms"]
    first_io = max(s["scheduled_ms"] + s["skew_ms"] for s in starts)
    iops = sum((r.get(d) or {}).get("iops", 0.0) for r in results for d in ("read", "write"))
    claimed = max(_ms(i["claimed_at"]) for i in run["items"])
    ready = max(_ms(i["ready_at"]) for i in run["items"])
    return {
        "iops": iops,
        "request_to_first_io_ms": first_io - sent_ms,
        # Where the time to the first I/O goes: the queue poll and the claim, the layout
        # (fio's create_only pass) and ready, then the barrier's lead to the start instant.
        "request_to_last_claim_ms": claimed - sent_ms,
        "last_claim_to_last_ready_ms": ready - claimed,
        "last_ready_to_start_instant_ms": scheduled - ready,
        "request_to_start_instant_ms": scheduled - sent_ms,
        "fio_end_to_completed_ms": seen_ms - max(r["ended_at_ms"] for r in results),
        # The run's last write (it became completed) after the last item's (its result was
        # stored): what the service adds once the agents are done.
        "result_stored_to_completed_ms": _ms(run["updated_at"])
        - max(_ms(i["ended_at"]) for i in run["items"]),
        "request_to_completed_ms": seen_ms - sent_ms,
    }


def services_aside(stack: localstack.Stack) -> None:
    """Model a client VM, where the API, the database and the queue service do not run: their
    processes' scheduling groups (each runs in a session of its own, so the kernel's
    autogroup is theirs alone) get the lowest CPU weight, for raw and service runs alike.
    The agents keep theirs: on a client VM they share its cores with fio."""
    for p in stack.procs:
        if not p.name.startswith("agent-") and p.alive():
            Path(f"/proc/{p.pid}/autogroup").write_text("19")


def measure(
    n: int, repeat: int, workload: Workload, mount_root: Path, aside: bool = False
) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"overhead-{n}-"))
    mount = Path(tempfile.mkdtemp(prefix="overhead-", dir=mount_root))
    work = root / "raw"
    work.mkdir()
    stack = localstack.up(agents=n, targets={"scratch": str(mount)}, directory=root / "stack")
    if aside:
        services_aside(stack)
    rows: list[dict[str, float]] = []
    try:
        with httpx.Client(base_url=stack.api_url, timeout=60) as api:
            service(api, workload, n)  # lays out the agents' files; not counted
            with agents_paused(stack):
                raw_fio(workload, n, mount, work, "warm")
            for r in range(repeat):
                if r % 2 == 0:
                    with agents_paused(stack):
                        raw = raw_fio(workload, n, mount, work, f"r{r}")
                    svc = service(api, workload, n)
                else:
                    svc = service(api, workload, n)
                    with agents_paused(stack):
                        raw = raw_fio(workload, n, mount, work, f"r{r}")
                rows.append({**svc, "raw_iops": raw, "ratio": svc["iops"] / raw})
    finally:
        localstack.down(root / "stack")
        shutil.rmtree(mount, ignore_errors=True)
    keys = [k for k in rows[0] if k != "raw_iops"]
    return {
        "clients": n,
        "runs": rows,
        "median": {k: statistics.median(row[k] for row in rows) for k in keys},
        "worst": {
            "request_to_first_io_ms": max(r["request_to_first_io_ms"] for r in rows),
            "fio_end_to_completed_ms": max(r["fio_end_to_completed_ms"] for r in rows),
            "result_stored_to_completed_ms": max(r["result_stored_to_completed_ms"] for r in rows),
        },
        "service_lower": sum(r["ratio"] < 1 for r in rows),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, nargs="+", default=[1, 4])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--runtime", type=int, default=10)
    p.add_argument("--mount-root", type=Path, default=Path("/dev/shm"))
    p.add_argument("--direct", action="store_true", help="O_DIRECT (not on tmpfs)")
    p.add_argument(
        "--services-aside",
        action="store_true",
        help="the API, Cosmos DB server and Azurite at the lowest CPU weight (a client VM)",
    )
    p.add_argument("--out", type=Path, default=OUT / "overhead.json")
    a = p.parse_args()
    localstack.ensure_installed()
    workload = Workload(
        rw="randread", bs="4k", iodepth=1, size="64m", runtime=a.runtime, direct=a.direct
    )
    report: dict[str, Any] = {
        "workload": workload.model_dump(),
        "mount_root": str(a.mount_root),
        "repeat": a.repeat,
        "note": "2 shared cores, other work running: compare the alternated ratios",
        "services_aside": a.services_aside,
        "by_clients": [
            measure(n, a.repeat, workload, a.mount_root, a.services_aside) for n in a.clients
        ],
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=2))
    for m in report["by_clients"]:
        print(m["clients"], json.dumps(m["median"]), "service lower", m["service_lower"])


if __name__ == "__main__":
    # Stopped with SIGTERM, as with Ctrl-C: its ``finally`` stops the stack it started.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    main()
