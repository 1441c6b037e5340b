"""Change-point detection as series grow: core.analysis.changepoint.detect vs Apache Otava, time,
memory and which planted changes each finds, from 200 to 10,000 points.

Series (reproducible from --seed): N points at a level of 20,000 with 2 % relative Gaussian
noise and four planted steps, at 1/5, 2/5, 3/5 and 4/5 of the length: -10 %, +12 %, -7 %,
+8 %. For each size, --seeds such series (the first is the one timed and measured) and as
many of pure noise (no change), each with its own seed.

Each detector runs each size in a fresh process, so memory is that size's alone:
- ours: ``core.analysis.changepoint.detect(values, pvalue=..., min_magnitude_pct=...)`` in this
  venv (or, with --ours-from DIR, the ``core`` package of another checkout, for before/after
  figures);
- Otava: ``otava.analysis.compute_change_points(values, max_pvalue=...,
  min_magnitude=...)`` (window_len=50, its default) in the venv bench/detect.py creates
  (``pip install apache-otava==0.8.0``). Both get the same floor: --min-magnitude percent
  for ours, the same as a fraction for Otava (its ``change_magnitude`` is our
  ``magnitude_pct`` / 100).

Measured per size and detector: the first planted series once under tracemalloc (the peak of
what the detection allocates, numpy arrays included), then every planted series timed
(perf_counter and process_time; median and max reported), then the noise series; finally
the process's peak RSS (ru_maxrss), which also holds the interpreter, numpy and the input.
Found: a series is exact when its change points are the planted ones, each within +-2.

Goals (issue 17): at 8,000 points the planted changes and nothing else, in under 1 s and
200 MiB.

Usage: .venv/bin/python -m bench.detect_scale [--sizes 200,1000,...] [--seeds 10]
       [--ours-from DIR --ours-label TEXT] [--out detect_scale.json] [--skip-otava]
Before/after: bench/out/detect_scale_before.json is the whole-series search of commit
8f84b56 (``git archive 8f84b56 core | tar -x -C DIR``), measured with --ours-from DIR
--skip-otava --seeds 1 --sizes 200,1000,2000,4000,8000 (10,000 points would need 7 GiB).
Writes bench/out/detect_scale.json (or --out) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench.detect import OTAVA_SPEC, TOLERANCE, ensure_otava
from core.analysis.magnitude import DEFAULT_MIN_MAGNITUDE_PCT

OUT = Path(__file__).parent / "out"
SIZES = (200, 1000, 2000, 4000, 8000, 10_000)
STEPS = ((0.2, 0.90), (0.4, 1.12), (0.6, 0.93), (0.8, 1.08))  # (where, factor)
LEVEL, NOISE = 20_000.0, 0.02
GOAL_POINTS, GOAL_SECONDS, GOAL_MIB = 8000, 1.0, 200.0

# Runs in either venv: reads {"planted": [...], "noise": [...], "pvalue", "floor_pct"}.
WORKER = r"""
import json, resource, statistics, sys, time, tracemalloc

job = json.load(sys.stdin)
if job["detector"] == "ours":
    from core.analysis.changepoint import detect

    def find(values):
        return [cp.index for cp in detect(values, **job["ours_kwargs"])]
else:
    from otava.analysis import compute_change_points

    def find(values):
        points, _weak = compute_change_points(
            values, max_pvalue=job["pvalue"], min_magnitude=job["floor_pct"] / 100.0
        )
        return [int(p.index) for p in points]

def rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux

idle = rss_mib()
tracemalloc.start()
find(job["planted"][0])
peak = tracemalloc.get_traced_memory()[1] / 2**20
tracemalloc.stop()
found, wall, cpu = [], [], []
for values in job["planted"]:
    w, c = time.perf_counter(), time.process_time()
    found.append(find(values))
    wall.append(time.perf_counter() - w)
    cpu.append(time.process_time() - c)
noise = [find(values) for values in job["noise"]]
json.dump({"found": found, "noise_found": noise, "wall_s": wall, "cpu_s": cpu,
           "tracemalloc_peak_mib": peak, "rss_idle_mib": idle, "rss_peak_mib": rss_mib()},
          sys.stdout)
"""


def planted(points: int) -> list[int]:
    return [int(points * where) for where, _ in STEPS]


def make(points: int, seed: int, with_steps: bool) -> list[float]:
    rng = np.random.default_rng(seed)
    values = LEVEL * (1.0 + NOISE * rng.standard_normal(points))
    if with_steps:
        for (_, factor), index in zip(STEPS, planted(points), strict=True):
            values[index:] *= factor
    return [float(v) for v in values]


def exact(truth: list[int], found: list[int]) -> bool:
    return len(found) == len(truth) and all(
        abs(a - b) <= TOLERANCE for a, b in zip(found, truth, strict=True)
    )


def run_size(
    python: Path, detector: str, points: int, args: argparse.Namespace, env: dict[str, str]
) -> dict[str, Any]:
    job = {
        "detector": detector,
        "pvalue": args.pvalue,
        "floor_pct": args.min_magnitude,
        # An older checkout's detect may not know the floor.
        "ours_kwargs": {"pvalue": args.pvalue}
        | ({} if args.ours_from else {"min_magnitude_pct": args.min_magnitude}),
        "planted": [make(points, args.seed + i, True) for i in range(args.seeds)],
        "noise": [make(points, args.seed + 10_000 + i, False) for i in range(args.seeds)],
    }
    done = subprocess.run(
        # -P: no current directory on sys.path, so PYTHONPATH (--ours-from) decides.
        [str(python), "-P", "-c", WORKER],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        env=env,
        timeout=args.timeout,
        check=False,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-2000:]}
    raw: dict[str, Any] = json.loads(done.stdout)
    truth = planted(points)
    return {
        "first_series_found": raw["found"][0],
        "first_series_exact": exact(truth, raw["found"][0]),
        "exact": sum(exact(truth, f) for f in raw["found"]),
        "series": args.seeds,
        "noise_series_flagged": sum(bool(f) for f in raw["noise_found"]),
        "noise_false_changes": sum(len(f) for f in raw["noise_found"]),
        "wall_s": {"median": statistics.median(raw["wall_s"]), "max": max(raw["wall_s"])},
        "cpu_s": {"median": statistics.median(raw["cpu_s"]), "max": max(raw["cpu_s"])},
        "tracemalloc_peak_mib": raw["tracemalloc_peak_mib"],
        "rss_idle_mib": raw["rss_idle_mib"],
        "rss_peak_mib": raw["rss_peak_mib"],
    }


def cell(r: dict[str, Any] | None) -> list[str]:
    if r is None:
        return ["", "", "", ""]
    if "error" in r:
        return ["error", "", "", ""]
    found = "yes" if r["first_series_exact"] else f"no: {r['first_series_found']}"
    return [
        f"{r['wall_s']['median'] * 1e3:,.0f} ({r['cpu_s']['median'] * 1e3:,.0f} CPU)",
        f"{r['tracemalloc_peak_mib']:,.1f} / {r['rss_peak_mib']:,.0f}",
        found,
        f"{r['exact']} of {r['series']} / {r['noise_false_changes']}",
    ]


def table(report: dict[str, Any]) -> str:
    names = [name for name in ("ours", "otava") if name in report["results"]]
    head = ["ms median (CPU)", "MiB traced / RSS", "planted found", "exact / false on noise"]
    lines = [
        "| points | " + " | ".join(f"{n}: {h}" for n in names for h in head) + " |",
        "|---" * (1 + len(head) * len(names)) + "|",
    ]
    for points in report["sizes"]:
        cells = [c for n in names for c in cell(report["results"][n].get(str(points)))]
        lines.append(f"| {points:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def goals(report: dict[str, Any]) -> dict[str, Any]:
    r = report["results"]["ours"].get(str(GOAL_POINTS))
    if not r or "error" in r:
        return {"checked": False}
    return {
        "checked": True,
        "planted_and_nothing_else": r["first_series_exact"],
        "under_1_s": r["wall_s"]["median"] < GOAL_SECONDS,
        "under_200_mib": max(r["tracemalloc_peak_mib"], r["rss_peak_mib"]) < GOAL_MIB,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--seeds", type=int, default=10, help="planted and noise series per size")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--pvalue", type=float, default=0.001)
    parser.add_argument("--min-magnitude", type=float, default=DEFAULT_MIN_MAGNITUDE_PCT)
    parser.add_argument("--ours-from", type=Path, help="checkout whose core package to measure")
    parser.add_argument("--ours-label", help="what --ours-from holds, for the report")
    parser.add_argument("--otava-venv", type=Path, default=Path("/tmp/otava-venv"))
    parser.add_argument("--skip-otava", action="store_true")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per size")
    parser.add_argument("--out", default="detect_scale.json")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds: at least 1")
    sizes = [int(s) for s in args.sizes.split(",")]

    # One thread each: numpy's BLAS would otherwise take the second core.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    ours_env = env
    if args.ours_from:
        ours_env = {**env, "PYTHONPATH": str(args.ours_from.resolve())}
    detectors: list[tuple[str, Path, dict[str, str]]] = [("ours", Path(sys.executable), ours_env)]
    if not args.skip_otava:
        detectors.append(("otava", ensure_otava(args.otava_venv), env))

    report: dict[str, Any] = {
        "sizes": sizes,
        "seeds": args.seeds,
        "seed": args.seed,
        "pvalue": args.pvalue,
        "min_magnitude_pct": args.min_magnitude,
        "steps": [{"at": w, "factor": f} for w, f in STEPS],
        "noise": NOISE,
        "tolerance": TOLERANCE,
        "ours_from": args.ours_label or str(args.ours_from or "this checkout"),
        "otava": None if args.skip_otava else f"{OTAVA_SPEC}, window_len=50",
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
        },
        "results": {name: {} for name, _, _ in detectors},
    }
    for points in sizes:
        for name, python, detector_env in detectors:
            try:
                result = run_size(python, name, points, args, detector_env)
            except subprocess.TimeoutExpired:
                result = {"error": f"timed out after {args.timeout:g} s"}
            report["results"][name][str(points)] = result
            print(f"{name} {points}: {json.dumps(result)}", flush=True)
    report["goals_8000"] = goals(report)

    OUT.mkdir(exist_ok=True)
    (OUT / args.out).write_text(json.dumps(report, indent=2) + "\n")
    print()
    print(table(report))
    print(f"\ngoals at {GOAL_POINTS:,} points: {report['goals_8000']}")


if __name__ == "__main__":
    main()
