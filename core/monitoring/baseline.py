"""A finished run against its series' baseline (pure over the store's series points).

The baseline is the one the gate uses (core.monitoring.monitor): the earlier points of the
series' latest segment, when the run shares their infrastructure. Each metric of the run's
own point is judged by the same ``gate`` (mean of the baseline, worse by more than the
service's gate percentage is a regression), so the bot's "compare with baseline" says what
the gate said, with the baseline's mean, spread and size beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.analysis.series import METRICS, gate, segments
from core.monitoring.monitor import step_series_key
from core.ports import Doc, Store

SHOWN = ("read.iops", "read.bw_bytes", "read.p99", "write.iops", "write.bw_bytes", "write.p99")


def against_baseline(store: Store, run: Doc, *, gate_pct: float) -> Doc:
    """{series_key, baseline_points, rows: [{metric, baseline_mean, baseline_std, value,
    change_pct, verdict}], note} for a run as RunService.get_run returns it."""
    agg = run.get("aggregate") or {}
    if not agg:
        return {"series_key": None, "baseline_points": 0, "rows": [], "note": "no figures yet"}
    key = step_series_key(run.get("engine", "fio"), run["targets"], agg)
    points = sorted(store.series.points(key), key=lambda p: p["time_ms"])
    mine = [p for p in points if p["run_id"] == run["id"]]
    if not mine:
        return {"series_key": key, "baseline_points": 0, "rows": [], "note": "not in a series"}
    point = mine[-1]
    earlier = [p for p in points if p["time_ms"] < point["time_ms"] and p["run_id"] != run["id"]]
    base = _latest_segment(point, earlier)
    if not base:
        note = "the first run of its series (or of new infrastructure): no baseline yet"
        return {"series_key": key, "baseline_points": 0, "rows": [], "note": note}
    rows = [row for m in SHOWN if (row := _row(m, point, base, gate_pct)) is not None]
    return {"series_key": key, "baseline_points": len(base), "rows": rows, "note": None}


def _latest_segment(point: Mapping[str, Any], earlier: Sequence[Doc]) -> list[Mapping[str, Any]]:
    segs = segments(earlier)
    return list(segs[-1]) if segs and segs[-1][-1]["infra"] == point["infra"] else []


def _row(
    metric: str, point: Mapping[str, Any], base: Sequence[Mapping[str, Any]], gate_pct: float
) -> dict[str, Any] | None:
    if metric not in point["metrics"]:
        return None
    values = [float(p["metrics"][metric]) for p in base if metric in p["metrics"]]
    if not values:
        return None
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1)) ** 0.5
    verdict = gate(
        values,
        float(point["metrics"][metric]),
        higher_is_better=METRICS[metric],
        max_change_pct=gate_pct,
    )
    return {
        "metric": metric,
        "baseline_mean": mean,
        "baseline_std": std,
        "value": float(point["metrics"][metric]),
        "change_pct": verdict["change_pct"],
        "verdict": verdict["verdict"],
    }
