"""Where the API's time goes under load (issue 17.6): py-spy samples the API process of a
local stack (no agent) while 8 callers GET one run, then while 8 callers POST runs; the
report lists, per operation, the share of samples in each of the top frames, the project's
own functions and the libraries (azure-cosmos, pydantic, FastAPI/Starlette, httpx/urllib3,
json), from py-spy's collapsed stacks.

Usage: .venv/bin/python bench/profile_api.py [--seconds 10] [--callers 8]
Writes bench/out/profile_api.json. Needs py-spy (requirements-bench.txt) and root, or a
ptrace-permitting kernel.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import httpx

from bench.api_latency import RUN, load

ROOT = Path(__file__).resolve().parent.parent
SITE = "site-packages/"
GROUPS = {
    "azure-cosmos": ("azure/cosmos/",),
    "azure-core": ("azure/core/",),
    "pydantic": ("pydantic/", "pydantic_core/"),
    "starlette/fastapi": ("starlette/", "fastapi/"),
    "http client (requests/urllib3/httpx)": ("urllib3/", "requests/", "httpx/", "httpcore/"),
    "uvicorn/anyio/h11 (server, threads)": ("uvicorn/", "anyio/", "h11/"),
}
PROJECT = tuple(f"{ROOT}/{part}/" for part in ("core", "adapters", "functions"))


def own_group(frame: str) -> str | None:
    """The library or project package of a py-spy frame ``func (/full/path.py:line)``."""
    if SITE in frame:
        tail = frame.split(SITE, 1)[1]
        return next(
            (name for name, marks in GROUPS.items() if tail.startswith(marks)), "other libraries"
        )
    for part in PROJECT:
        if part in frame:
            return "project: " + part[len(str(ROOT)) + 1 : -1]
    return None


def summarise(collapsed: Path) -> dict[str, Any]:
    """Self time by library (the innermost frame that is a library's or the project's;
    stdlib frames count for the library that called them), and inclusive time of the
    project's functions, as shares of the samples in which a thread was on a CPU."""
    self_by_group: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        frames = stack.split(";")
        total += n
        leaf = next((g for f in reversed(frames) if (g := own_group(f))), "stdlib")
        self_by_group[leaf] += n
        for f in {f for f in frames if (own_group(f) or "").startswith("project")}:
            inclusive[f.replace(f"{ROOT}/", "")] += n
    return {
        "samples": total,
        "self_by_library": {k: round(v / total, 3) for k, v in self_by_group.most_common()},
        "project_functions_inclusive": {
            k: round(v / total, 3) for k, v in inclusive.most_common(15)
        },
    }


def record(pid: int, seconds: float, out: Path, work: Any) -> dict[str, Any]:
    spy = shutil.which("py-spy", path=str(ROOT / ".venv" / "bin")) or "py-spy"
    argv = [spy, "record", "--pid", str(pid), "--duration", str(int(seconds))]
    # On-CPU samples only (no --idle): what the API's threads spend its cores on.
    argv += ["--format", "raw", "--output", str(out), "--full-filenames", "--nonblocking"]
    argv += ["--rate", "200"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    figures: dict[str, Any] = {}
    t = threading.Thread(target=lambda: figures.update(work()))
    t.start()
    t.join()
    proc.wait(timeout=seconds + 60)
    return {"load": figures, **summarise(out)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--callers", type=int, default=8)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "profile_api.json")
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    env = {**os.environ, "BENCH_LOCAL_DIR": str(work / "stack")}
    (work / "scratch").mkdir()
    up = [str(ROOT / ".venv" / "bin" / "python"), "-m", "benchctl", "local", "up", "--agents"]
    up += ["0", "--target", f"read-me={work / 'scratch'}"]
    for k in range(a.callers):  # a target per POSTing caller (bench.api_latency)
        up += ["--target", f"c{k}={work / 'scratch'}"]
    subprocess.run(up, cwd=ROOT, env=env, check=True, capture_output=True)
    state = json.loads((work / "stack" / "stack.json").read_text())
    url = f"http://127.0.0.1:{state['api_port']}"
    api_pid = next(p["pid"] for p in state["procs"] if p["name"] == "api")
    report: dict[str, Any] = {"seconds": a.seconds, "callers": a.callers}
    try:
        with httpx.Client(base_url=url, timeout=60) as api:
            run_id = api.post("/api/runs", json={"target": "read-me", "workload": RUN}).json()["id"]
            for _ in range(20):
                api.get(f"/api/runs/{run_id}")
        for op in ("get", "post"):
            report[op] = record(
                api_pid,
                a.seconds,
                work / f"{op}.txt",
                lambda op=op: load(url, a.callers, a.seconds, op, run_id),
            )
    finally:
        down = [str(ROOT / ".venv" / "bin" / "python"), "-m", "benchctl", "local", "down"]
        subprocess.run(down, cwd=ROOT, env=env, capture_output=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    # Stopped with SIGTERM, as with Ctrl-C: its ``finally`` stops the stack it started.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    main()
