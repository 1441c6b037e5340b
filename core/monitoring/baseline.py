"""A finished run against its series' baseline, as the regression gate judged it (pure over
the store's series points).

The gate is defined once (core.analysis.gate) and applied when the run is finalized; the
run's series point keeps each gated metric's verdict with the figures behind it (the
reference's median and robust sd, how many runs it holds, the change and the band). The
bot's "compare with baseline" shows those, so it says what the gate said, and what the run's
own card and ``benchctl run --fail-on-regression`` say: nothing is judged again here.
"""

from __future__ import annotations

from pydantic import BaseModel

from core.analysis.gate import DIRECTIONS, GATED
from core.models.gate import KeptVerdict
from core.models.views import RunView
from core.monitoring.monitor import step_series_key
from core.ports import Store

SHOWN = tuple(f"{d}.{m}" for d in DIRECTIONS for m in GATED)


class BaselineRow(BaseModel):
    """One gated metric of the run against its reference, as the gate judged it."""

    metric: str
    value: float
    median: float | None
    sd: float | None
    points: int
    change_pct: float | None
    band_pct: float | None
    verdict: str
    why: str


class Baseline(BaseModel):
    series_key: str | None
    baseline_points: int
    rows: list[BaselineRow]
    note: str | None


def against_baseline(store: Store, run: RunView) -> Baseline:
    """The run's last step (the one its ``aggregate`` is) against its series' baseline, for
    a run as RunService.get_run returns it."""
    agg = run.aggregate
    if agg is None:
        return Baseline(series_key=None, baseline_points=0, rows=[], note="no figures yet")
    key = step_series_key(run.engine, run.targets, agg)
    mine = [p.named() for p in store.series.points(key) if p.run_id == run.id]
    if not mine:
        return Baseline(series_key=key, baseline_points=0, rows=[], note="not in a series")
    point = max(mine, key=lambda p: (p.time_ms, p.step))
    rows = [r for m in SHOWN if (r := _row(m, point.gate.get(m))) is not None]
    if not rows:
        note = "judged before the gate kept its figures: no baseline to show"
        return Baseline(series_key=key, baseline_points=0, rows=[], note=note)
    n = max(r.points for r in rows)
    if n == 0:
        note = "the first run of its series (or of new infrastructure): no baseline yet"
        return Baseline(series_key=key, baseline_points=0, rows=[], note=note)
    return Baseline(series_key=key, baseline_points=n, rows=rows, note=None)


def _row(metric: str, verdict: KeptVerdict | None) -> BaselineRow | None:
    ref = verdict.reference if verdict is not None else None
    if verdict is None or ref is None or verdict.value is None:
        return None  # not gated, or a verdict of the gate before it kept its reference
    return BaselineRow(
        metric=metric,
        value=verdict.value,
        median=ref.median,
        sd=ref.sd,
        points=ref.points,
        change_pct=verdict.change_pct,
        band_pct=verdict.band_pct,
        verdict=verdict.verdict,
        why=verdict.why,
    )
