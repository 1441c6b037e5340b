"""A finished run against its series' baseline, as the regression gate judged it (pure over
the store's series points).

The gate is defined once (core.analysis.gate) and applied when the run is finalized; the
run's series point keeps each gated metric's verdict with the figures behind it (the
reference's median and robust sd, how many runs it holds, the change and the band). The
bot's "compare with baseline" shows those, so it says what the gate said, and what the run's
own card and ``benchctl run --fail-on-regression`` say: nothing is judged again here.
"""

from __future__ import annotations

from typing import Any

from core.analysis.gate import DIRECTIONS, GATED
from core.analysis.series import named
from core.monitoring.monitor import step_series_key
from core.ports import Doc, Store

SHOWN = tuple(f"{d}.{m}" for d in DIRECTIONS for m in GATED)


def against_baseline(store: Store, run: Doc) -> Doc:
    """{series_key, baseline_points, rows: [{metric, value, median, sd, points, change_pct,
    band_pct, verdict, why}], note} for a run as RunService.get_run returns it (its last
    step, the one its ``aggregate`` is)."""
    agg = run.get("aggregate") or {}
    if not agg:
        return {"series_key": None, "baseline_points": 0, "rows": [], "note": "no figures yet"}
    key = step_series_key(run.get("engine", "fio"), run["targets"], agg)
    mine = [named(p) for p in store.series.points(key) if p["run_id"] == run["id"]]
    if not mine:
        return {"series_key": key, "baseline_points": 0, "rows": [], "note": "not in a series"}
    point = max(mine, key=lambda p: (p["time_ms"], p["step"]))
    judged: dict[str, Any] = point.get("gate") or {}
    rows = [r for m in SHOWN if (r := _row(m, judged.get(m))) is not None]
    if not rows:
        note = "judged before the gate kept its figures: no baseline to show"
        return {"series_key": key, "baseline_points": 0, "rows": [], "note": note}
    n = max(r["points"] for r in rows)
    if n == 0:
        note = "the first run of its series (or of new infrastructure): no baseline yet"
        return {"series_key": key, "baseline_points": 0, "rows": [], "note": note}
    return {"series_key": key, "baseline_points": n, "rows": rows, "note": None}


def _row(metric: str, verdict: Any) -> dict[str, Any] | None:
    ref = verdict.get("reference") if isinstance(verdict, dict) else None
    if not isinstance(ref, dict):
        return None  # not gated, or a verdict of the gate before it kept its reference
    return {
        "metric": metric,
        "value": float(verdict["value"]),
        "median": ref.get("median"),
        "sd": ref.get("sd"),
        "points": int(ref.get("points") or 0),
        "change_pct": verdict.get("change_pct"),
        "band_pct": verdict.get("band_pct"),
        "verdict": str(verdict["verdict"]),
        "why": str(verdict.get("why") or ""),
    }
