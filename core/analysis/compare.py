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

NOISE_SIGMAS = 3.0
MIN_NOISE_POINTS = 3


def noise_pct(points: Sequence[Mapping[str, Any]], exclude_runs: set[str]) -> dict[str, float]:
    """Per metric: 100 x stdev / mean over the latest segment, without the compared runs."""
    segs = segments(points)
    latest = [p for p in (segs[-1] if segs else []) if p["run_id"] not in exclude_runs]
    out: dict[str, float] = {}
    for metric in METRICS:
        values = np.array([p["metrics"][metric] for p in latest if metric in p["metrics"]])
        if len(values) >= MIN_NOISE_POINTS and values.mean() > 0:
            out[metric] = float(100 * values.std(ddof=1) / values.mean())
    return out


def compare_aggregates(
    a: Mapping[str, Any], b: Mapping[str, Any], noise: Mapping[str, float]
) -> list[dict[str, Any]]:
    ma, mb = metrics_of(a), metrics_of(b)
    rows = []
    for metric in [m for m in METRICS if m in ma and m in mb]:
        va, vb = ma[metric], mb[metric]
        delta_pct = 100 * (vb - va) / va if va else None
        sigma = noise.get(metric)
        if delta_pct is None or sigma is None:
            verdict = "no noise estimate"
        elif abs(delta_pct) <= NOISE_SIGMAS * sigma:
            verdict = "within noise"
        else:
            better = (delta_pct > 0) == METRICS[metric]
            verdict = "better" if better else "worse"
        rows.append(
            {
                "metric": metric,
                "a": va,
                "b": vb,
                "delta": vb - va,
                "delta_pct": delta_pct,
                "noise_pct": sigma,
                "verdict": verdict,
            }
        )
    return rows


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
