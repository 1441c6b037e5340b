"""Two runs side by side, and whether their difference is more than the series' noise
(pure).

The noise of a metric is its coefficient of variation over the latest infrastructure
segment of run A's series (other runs of the same workload on the same infrastructure). A
difference counts when it exceeds NOISE_SIGMAS times that; with fewer than
MIN_NOISE_POINTS runs there is no estimate and the verdict says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.analysis.series import METRICS, metrics_of, segments
from core.models.series import StepPoint

NOISE_SIGMAS = 3.0
MIN_NOISE_POINTS = 3


def noise_pct(points: Sequence[StepPoint], exclude_runs: set[str]) -> dict[str, float]:
    """Per metric: 100 x stdev / mean over the latest segment, without the compared runs."""
    segs = segments([p.named() for p in points])
    latest = [p for p in (segs[-1] if segs else []) if p.run_id not in exclude_runs]
    out: dict[str, float] = {}
    for metric in METRICS:
        values = np.array([p.metrics[metric] for p in latest if metric in p.metrics])
        if len(values) >= MIN_NOISE_POINTS and values.mean() > 0:
            out[metric] = float(100 * values.std(ddof=1) / values.mean())
    return out


def compare_aggregates(
    a: Mapping[str, Any], b: Mapping[str, Any], noise: Mapping[str, float]
) -> list[dict[str, Any]]:
    """Per metric, B against A. Bandwidth takes IOPS' verdict: one block size makes it IOPS
    times a constant, so the two must not disagree (core.analysis.gate, rule 6)."""
    ma, mb = metrics_of(a), metrics_of(b)
    rows = [
        judged(metric, ma[metric], mb[metric], noise.get(metric), METRICS[metric])
        for metric in METRICS
        if metric in ma and metric in mb
    ]
    verdicts = {r["metric"]: r["verdict"] for r in rows}
    for r in rows:
        direction, name = r["metric"].split(".", 1)
        if name == "bw_bytes" and f"{direction}.iops" in verdicts:
            r["verdict"] = verdicts[f"{direction}.iops"]
    return rows


def judged(
    metric: str, va: float, vb: float, sigma: float | None, higher_better: bool
) -> dict[str, Any]:
    """One row of a comparison: B against A, judged against NOISE_SIGMAS x the series'
    noise (a percentage), or "no noise estimate" without one."""
    delta_pct = 100 * (vb - va) / va if va else None
    if delta_pct is None or sigma is None:
        verdict = "no noise estimate"
    elif abs(delta_pct) <= NOISE_SIGMAS * sigma:
        verdict = "within noise"
    else:
        verdict = "better" if (delta_pct > 0) == higher_better else "worse"
    return {
        "metric": metric,
        "a": va,
        "b": vb,
        "delta": vb - va,
        "delta_pct": delta_pct,
        "noise_pct": sigma,
        "verdict": verdict,
    }


def summary(rows: Sequence[Mapping[str, Any]]) -> str:
    worse = [r["metric"] for r in rows if r["verdict"] == "worse"]
    better = [r["metric"] for r in rows if r["verdict"] == "better"]
    if not rows:
        return "nothing to compare: a run has no aggregate"
    if all(r["verdict"] == "no noise estimate" for r in rows):
        return "no noise estimate: the series has too few runs to judge"
    if worse:
        return "B is worse beyond noise on " + ", ".join(worse)
    if better:
        return "B is better beyond noise on " + ", ".join(better)
    return "the difference is within the series' noise"


# A metadata phase's figures: operations per second (higher is better) and the latency of
# one operation, mean and percentiles (lower is better), as the published charts show them.
# An operation's latency is its total (fio's file engines time the whole call).
PHASE_METRICS: dict[str, bool] = {
    "iops": True,
    "lat.mean": False,
    "lat.p50": False,
    "lat.p99": False,
}


def phase_metrics(aggregate: Mapping[str, Any]) -> dict[str, float]:
    """The one direction a metadata phase's operations are counted in (fio's: write for
    create and delete, read for stat and open)."""
    for d in ("read", "write"):
        a = aggregate.get(d)
        if a:
            lat = a.get("lat_ns") or a["clat_ns"]
            return {
                "iops": float(a["iops"]),
                "lat.mean": float(a["lat_mean_ns"]),
                "lat.p50": float(lat["p50"]),
                "lat.p99": float(lat["p99"]),
            }
    return {}


def compare_phase(
    op: str, a: Mapping[str, Any], b: Mapping[str, Any], series_noise: Mapping[str, float]
) -> list[dict[str, Any]]:
    """Rows ``<op>.iops``, ``<op>.lat.mean``, ``<op>.lat.p50``, ``<op>.lat.p99`` for one
    phase of two metadata runs; the noise of iops and percentiles is their series' (the
    direction's)."""
    ma, mb = phase_metrics(a), phase_metrics(b)
    d = "read" if a.get("read") else "write"
    return [
        judged(f"{op}.{metric}", ma[metric], mb[metric], series_noise.get(f"{d}.{metric}"), up)
        for metric, up in PHASE_METRICS.items()
        if metric in ma and metric in mb
    ]
