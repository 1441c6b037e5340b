"""Change-point detection: core.analysis.changepoint.detect vs Apache Otava on the same
synthetic series.

Series (reproducible from --seed): --points values each (200 by default), a level drawn
log-uniformly in 1e3..1e5 with relative Gaussian noise of 1.5..4%, and one of
- noise (40%): no change;
- one step (40%): from a uniform index in 20..points-20 on, the level moves by -5..-20%;
- two steps (20%): a -5..-20% step, then 30 or more points later another of 5..20% either way.

Both detectors run at p <= 0.001 on every series with the same floor on the size of a
change (--min-magnitude, percent; ours' default), one process each, on one core:
- ours: ``core.analysis.changepoint.detect(values, pvalue=..., min_magnitude_pct=...)``, timed per
  call in this process;
- Otava: ``otava.analysis.compute_change_points(values, max_pvalue=..., min_magnitude=...)``
  with the floor as a fraction (its ``change_magnitude`` is our ``magnitude_pct`` / 100) and
  its default window_len=50, the entry point its own CLI's analysis uses. It runs in a
  separate venv (--otava-venv, created with ``pip install apache-otava==0.8.0`` when missing,
  as its pins may clash with the project's) in one subprocess fed the series as JSON on
  stdin; each call is timed inside it, so start-up and imports are not counted.

Reported: total and per-series time; for each detector how often it finds the planted
changes (same count, each index within +-2) and how many pure-noise series it flags; and
how often the two agree (same count, indices within +-2).

At about 1 ms (ours) and 4 ms (Otava) per 200-point series on this machine, the default
10,000 series take about a minute in all (55 s measured on 2 cores); --series N runs fewer.

Usage: .venv/bin/python bench/detect.py [--series 10000] [--points 200] [--seed 2026]
Writes bench/out/detect.json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from core.analysis.changepoint import detect
from core.analysis.magnitude import DEFAULT_MIN_MAGNITUDE_PCT

OUT = Path(__file__).parent / "out"
OTAVA_SPEC = "apache-otava==0.8.0"
TOLERANCE = 2  # indices within +-2 count as the same change point
KINDS = ("noise", "one step", "two steps")

# Runs inside the Otava venv: reads {"series": [...], "pvalue": p, "floor": f} on stdin.
OTAVA_WORKER = r"""
import json, sys, time
from importlib.metadata import version
from otava.analysis import compute_change_points

job = json.load(sys.stdin)
options = {"max_pvalue": job["pvalue"], "min_magnitude": job["floor"]}
compute_change_points(job["series"][0], **options)  # warm-up
found, seconds = [], []
for values in job["series"]:
    start = time.perf_counter()
    points, _weak = compute_change_points(values, **options)
    seconds.append(time.perf_counter() - start)
    found.append([int(p.index) for p in points])
json.dump({"version": version("apache-otava"), "found": found, "seconds": seconds}, sys.stdout)
"""


def generate(count: int, points: int, seed: int) -> list[dict[str, Any]]:
    """The synthetic series with their planted change indices."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        kind = KINDS[int(rng.choice(3, p=[0.4, 0.4, 0.2]))]
        level = float(10 ** rng.uniform(3, 5))
        noise = float(rng.uniform(0.015, 0.04))
        values = level * (1.0 + noise * rng.standard_normal(points))
        changes: list[int] = []
        if kind == "one step":
            changes = [int(rng.integers(20, points - 20 + 1))]
            values[changes[0] :] *= 1.0 - rng.uniform(0.05, 0.20)
        elif kind == "two steps":
            first = int(rng.integers(20, points - 50 + 1))
            second = int(rng.integers(first + 30, points - 20 + 1))
            changes = [first, second]
            values[first:] *= 1.0 - rng.uniform(0.05, 0.20)
            values[second:] *= 1.0 + rng.choice([-1.0, 1.0]) * rng.uniform(0.05, 0.20)
        cases.append({"kind": kind, "noise": noise, "changes": changes, "values": values.tolist()})
    return cases


def run_ours(cases: list[dict[str, Any]], pvalue: float, floor_pct: float) -> dict[str, Any]:
    detect(cases[0]["values"], pvalue=pvalue, min_magnitude_pct=floor_pct)  # warm-up
    found, seconds = [], []
    for case in cases:
        start = time.perf_counter()
        points = detect(case["values"], pvalue=pvalue, min_magnitude_pct=floor_pct)
        seconds.append(time.perf_counter() - start)
        found.append([cp.index for cp in points])
    return {"found": found, "seconds": seconds}


def ensure_otava(venv: Path) -> Path:
    """The venv's python with apache-otava importable; creates the venv when missing."""
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"creating {venv}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    probe = subprocess.run(
        [str(python), "-c", "import otava.analysis"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        print(f"installing {OTAVA_SPEC} into {venv}", flush=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", OTAVA_SPEC], check=True, timeout=900
        )
    return python


def otava_entry_points(python: Path) -> list[str]:
    """Where the installed Otava defines compute_change_points, should the call fail."""
    code = (
        "import pathlib, otava\n"
        "for f in sorted(pathlib.Path(otava.__file__).parent.rglob('*.py')):\n"
        "    for n, line in enumerate(f.read_text().splitlines(), 1):\n"
        "        if line.startswith('def compute_change_points'):\n"
        "            print(f'{f}:{n}: {line}')\n"
    )
    probe = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    return (probe.stdout or probe.stderr).splitlines()


def run_otava(
    cases: list[dict[str, Any]], pvalue: float, floor_pct: float, venv: Path, timeout: float
) -> dict[str, Any]:
    python = ensure_otava(venv)
    series = [case["values"] for case in cases]
    job = json.dumps({"series": series, "pvalue": pvalue, "floor": floor_pct / 100.0})
    # One thread, like ours: numpy's BLAS would otherwise take the second core.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    start = time.perf_counter()
    done = subprocess.run(
        [str(python), "-c", OTAVA_WORKER],
        input=job,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-2000:], "entry_points": otava_entry_points(python)}
    result: dict[str, Any] = json.loads(done.stdout)
    result["wall_seconds"] = wall
    return result


def same(a: list[int], b: list[int]) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= TOLERANCE for x, y in zip(a, b, strict=True))


def timing(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1e3 for s in seconds)
    return {
        "total_s": sum(seconds),
        "mean_ms": statistics.fmean(ms),
        "p50_ms": ms[len(ms) // 2],
        "p99_ms": ms[min(len(ms) - 1, int(len(ms) * 0.99))],
    }


def accuracy(cases: list[dict[str, Any]], found: list[list[int]]) -> dict[str, Any]:
    """Per kind: series whose planted changes were found exactly (+-2), missed, extra, off."""
    by_kind: dict[str, dict[str, int]] = {}
    for case, points in zip(cases, found, strict=True):
        row = by_kind.setdefault(
            case["kind"], {"series": 0, "exact": 0, "missed": 0, "extra": 0, "misplaced": 0}
        )
        row["series"] += 1
        truth = case["changes"]
        if same(truth, points):
            row["exact"] += 1
        elif len(points) < len(truth):
            row["missed"] += 1
        elif len(points) > len(truth):
            row["extra"] += 1
        else:
            row["misplaced"] += 1
    exact = sum(row["exact"] for row in by_kind.values())
    return {"exact": exact, "series": len(cases), "by_kind": by_kind}


def agreement(cases: list[dict[str, Any]], ours: list[list[int]], theirs: list[list[int]]) -> Any:
    counts = {"agree": 0, "different_count": 0, "same_count_index_off": 0}
    by_kind: dict[str, int] = {}
    for case, a, b in zip(cases, ours, theirs, strict=True):
        if same(a, b):
            counts["agree"] += 1
            by_kind[case["kind"]] = by_kind.get(case["kind"], 0) + 1
        elif len(a) != len(b):
            counts["different_count"] += 1
        else:
            counts["same_count_index_off"] += 1
    return {**counts, "agree_by_kind": by_kind}


def table(report: dict[str, Any]) -> str:
    ours, otava = report["ours"], report.get("otava")
    columns = [("ours (core.analysis.changepoint)", ours)]
    if otava and "timing" in otava:
        columns.append((f"Otava {otava['version']}", otava))
    lines = ["| | " + " | ".join(name for name, _ in columns) + " |"]
    lines.append("|---" * (len(columns) + 1) + "|")

    def row(label: str, cell: Any) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(r) for _, r in columns) + " |")

    row("total seconds", lambda r: f"{r['timing']['total_s']:.2f}")
    row("per series ms, mean", lambda r: f"{r['timing']['mean_ms']:.2f}")
    row(
        "per series ms, p50 / p99",
        lambda r: f"{r['timing']['p50_ms']:.2f} / {r['timing']['p99_ms']:.2f}",
    )
    row(
        "planted changes found (±2)",
        lambda r: f"{r['accuracy']['exact']} / {r['accuracy']['series']}",
    )
    for kind in KINDS:
        row(
            f"{kind}: exact / missed / extra / off",
            lambda r, k=kind: "{exact} / {missed} / {extra} / {misplaced} of {series}".format(
                **r["accuracy"]["by_kind"].get(
                    k, {"exact": 0, "missed": 0, "extra": 0, "misplaced": 0, "series": 0}
                )
            ),
        )
    if "agreement" in report:
        a = report["agreement"]
        lines.append("")
        lines.append("| ours vs Otava | series |")
        lines.append("|---|---|")
        lines.append(f"| agree (same count, indices ±2) | {a['agree']} |")
        lines.append(f"| different count | {a['different_count']} |")
        lines.append(f"| same count, an index off by >2 | {a['same_count_index_off']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--pvalue", type=float, default=0.001)
    parser.add_argument(
        "--min-magnitude", type=float, default=DEFAULT_MIN_MAGNITUDE_PCT, help="percent"
    )
    parser.add_argument("--otava-venv", type=Path, default=Path("/tmp/otava-venv"))
    parser.add_argument("--otava-timeout", type=float, default=1200.0, help="seconds")
    parser.add_argument("--skip-otava", action="store_true")
    args = parser.parse_args()

    cases = generate(args.series, args.points, args.seed)
    print(f"{len(cases)} series x {args.points} points, seed {args.seed}", flush=True)
    report: dict[str, Any] = {
        "series": args.series,
        "points": args.points,
        "seed": args.seed,
        "pvalue": args.pvalue,
        "min_magnitude_pct": args.min_magnitude,
        "tolerance": TOLERANCE,
        "machine": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
        },
        "kinds": {k: sum(c["kind"] == k for c in cases) for k in KINDS},
    }
    ours = run_ours(cases, args.pvalue, args.min_magnitude)
    report["ours"] = {"timing": timing(ours["seconds"]), "accuracy": accuracy(cases, ours["found"])}
    print(f"ours: {report['ours']['timing']['total_s']:.2f} s", flush=True)

    if not args.skip_otava:
        try:
            otava = run_otava(
                cases, args.pvalue, args.min_magnitude, args.otava_venv, args.otava_timeout
            )
        except (subprocess.SubprocessError, OSError) as exc:
            otava = {"error": f"{type(exc).__name__}: {exc}"}
        if "found" in otava:
            report["otava"] = {
                "version": otava["version"],
                "entry_point": "otava.analysis.compute_change_points (window_len=50)",
                "min_magnitude": args.min_magnitude / 100.0,
                "wall_seconds_with_startup": otava["wall_seconds"],
                "timing": timing(otava["seconds"]),
                "accuracy": accuracy(cases, otava["found"]),
            }
            report["agreement"] = agreement(cases, ours["found"], otava["found"])
            print(f"otava: {report['otava']['timing']['total_s']:.2f} s", flush=True)
        else:
            report["otava"] = otava
            print(f"otava failed: {otava}", flush=True)

    OUT.mkdir(exist_ok=True)
    (OUT / "detect.json").write_text(json.dumps(report, indent=2) + "\n")
    print()
    print(table(report))


if __name__ == "__main__":
    main()
