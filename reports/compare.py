"""Runs compared (issue 26.4): each run's last step overlaid on the others (its per-second
IOPS over the common window, its latency curve, its window's latency histogram) and a
deltas table, every run against the first, judged against the noise of the first run's
series (core.analysis.compare)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel

from core.analysis.series import METRICS
from core.latency import KIND_NAMES
from core.models.answers import Comparison
from core.models.views import RunView
from core.runs.service import RunService
from core.units import clients_text
from reports.curve_figures import CURVE_PERCENTILES, curve_groups
from reports.data import StepData, now_text, step_data
from reports.figures import Figure, new_figure
from reports.page import render, workload_text
from reports.series_figures import metric_text, metric_value
from tables.runs import curve_kind

Doc = dict[str, Any]
MAX_COMPARED = 6
LETTERS = "ABCDEF"
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b")


class ComparedRun(BaseModel):
    letter: str
    run: Doc  # as GET /api/runs/{id} answers
    curves: Doc
    step: StepData | None  # the last step with an aggregate


class CompareReport(BaseModel):
    runs: list[ComparedRun]
    comparisons: list[Doc]  # the first run against each other (GET /api/compare's)
    generated_at: str


def gather_compare(
    svc: RunService, compare: Callable[[RunView, RunView], Comparison], run_ids: Sequence[str]
) -> CompareReport:
    """Raises NotFound for an unknown run. ``compare`` is the monitor's (noise of the first
    run's series)."""
    runs, views = [], []
    for letter, run_id in zip(LETTERS, run_ids, strict=False):
        views.append(svc.get_run(run_id))
        run = views[-1].model_dump(mode="json")  # the report renders the JSON the API serves
        last = next((s for s in reversed(run["steps"]) if s.get("aggregate")), None)
        step = None
        if last is not None:
            results = svc.store.results.of_run(run_id)
            step = step_data(svc, run_id, last["step"], results)
        curves = svc.curves(run_id).model_dump(mode="json")
        runs.append(ComparedRun(letter=letter, run=run, curves=curves, step=step))
    comparisons = [compare(views[0], other).model_dump(mode="json") for other in views[1:]]
    return CompareReport(runs=runs, comparisons=comparisons, generated_at=now_text())


def label(c: ComparedRun) -> str:
    agg = c.run.get("aggregate") or {}
    who = clients_text(agg["clients"]) if agg.get("clients") else "no result"
    return f"{c.letter}: {c.run['id'][:10]}… {workload_text(c.run)}, {who}"


def _cell(letter: str, row: Doc | None, metric: str) -> Doc:
    """A run's value of ``metric`` and its change against the first (``row`` None: none)."""
    if not row:
        return {"letter": letter, "value": "-", "raw": None, "delta_pct": None, "verdict": ""}
    return {
        "letter": letter,
        "value": metric_value(row["b"], metric),
        "raw": row["b"],
        "delta_pct": row["delta_pct"],
        "verdict": row["verdict"],
    }


def deltas(report: CompareReport) -> list[Doc]:
    """One row per metric the first run has: each run's value, and for every other run
    its change against the first with the verdict (within noise, better, worse)."""
    first = report.runs[0]
    rows: list[Doc] = []
    by_metric = [{r["metric"]: r for r in c["rows"]} for c in report.comparisons]
    metrics = [m for m in METRICS if any(m in found for found in by_metric)]
    for metric in metrics:
        cells = []
        noise = None
        for other, found in zip(report.runs[1:], by_metric, strict=True):
            r = found.get(metric)
            noise = noise if r is None else r["noise_pct"]
            cells.append(_cell(other.letter, r, metric))
        a = next((f[metric]["a"] for f in by_metric if metric in f), None)
        rows.append(
            {
                "metric": metric,
                "name": metric_text(metric),
                "a": metric_value(a, metric),
                "raw_a": a,
                "noise_pct": noise,
                "others": cells,
            }
        )
    assert first.letter == "A"
    return rows


def compare_figures(report: CompareReport) -> list[Figure]:
    return [f for f in (_per_second(report), _curves(report), _histograms(report)) if f is not None]


def _per_second(report: CompareReport) -> Figure | None:
    """All clients' IOPS per second of each run's last step, from its common window's start
    (the seconds of the step's span, as the run's report draws them)."""
    fig = new_figure("IOPS per second (all clients, common window)", "seconds", "IOPS")
    fig.update_yaxes(rangemode="tozero")
    drawn = False
    for c, colour in zip(report.runs, COLOURS, strict=False):
        if c.step is None or c.step.window is None:
            continue
        start, end = c.step.window
        for d, every in c.step.total.items():
            points = [p for p in every if start < p.t_ms <= end + 500]
            if not points:
                continue
            fig.add_scatter(
                x=[round((p.t_ms - start) / 1000, 3) for p in points],
                y=[p.iops for p in points],
                name=f"{c.letter} {d}",
                mode="lines+markers",
                line={"color": colour, "dash": "solid" if d == "read" else "dot"},
            )
            drawn = True
    return Figure("compare-seconds", fig) if drawn else None


def _curves(report: CompareReport) -> Figure | None:
    """Each run's latency curve (p50 and p99), one colour per run."""
    everything = [p for c in report.runs for p in c.curves.get("latency") or []]
    if not everything:
        return None
    kind = curve_kind(everything)
    name = KIND_NAMES[kind]
    y_title = f"{name} latency, ms (log scale)"
    fig = new_figure(f"{name} latency vs IOPS", "IOPS (all clients)", y_title)
    fig.update_yaxes(type="log")
    for c, colour in zip(report.runs, COLOURS, strict=False):
        for group, mine in curve_groups(c.curves.get("latency") or []):
            _add_run_curve(fig, kind, f"{c.letter} ", group, mine, colour)
    return Figure("compare-curves", fig)


def _add_run_curve(
    fig: Any, kind: str, prefix: str, group: str, mine: list[Doc], colour: str
) -> None:
    """One curve of a run: p50 dotted, p99 solid, per direction its points have."""
    for d in ("read", "write"):
        for p, dash in zip(CURVE_PERCENTILES[:2], ("dot", "solid"), strict=True):
            key = f"{d}_{kind}_{p}_ns"
            pts = [q for q in mine if q.get(key) is not None]
            if pts:
                fig.add_scatter(
                    x=[q["iops"] for q in pts],
                    y=[q[key] / 1e6 for q in pts],
                    name=f"{prefix}{d} {p}" + (f" ({group})" if group else ""),
                    mode="lines+markers",
                    line={"color": colour, "dash": dash},
                )


def _histograms(report: CompareReport) -> Figure | None:
    """Each run's window latency histogram as a share of its I/Os, on one log axis."""
    steps = [(c, c.step) for c in report.runs if c.step is not None and c.step.histogram]
    if not steps:
        return None
    kinds = {s.histogram_kind for _, s in steps}
    name = KIND_NAMES["lat" if kinds == {"lat"} else "clat"]
    fig = new_figure(
        f"{name} latency histogram of each run's window", f"{name} latency, ms (log)", "% of I/Os"
    )
    fig.update_xaxes(type="log")
    for (c, s), colour in zip(steps, COLOURS, strict=False):
        for d, buckets in s.histogram.items():
            total = sum(v for _, v in buckets) or 1.0
            fig.add_scatter(
                x=[k / 1e6 for k, _ in buckets],
                y=[100 * v / total for _, v in buckets],
                name=f"{c.letter} {d}",
                mode="lines",
                line={"color": colour, "shape": "hvh"},
                fill="tozeroy",
                opacity=0.6,
            )
    return Figure("compare-histograms", fig)


def _fmt_pct(v: float | None) -> str:
    return "-" if v is None or math.isnan(v) else f"{v:+.1f}%"


def compare_page(report: CompareReport, *, nav: bool = False) -> str:
    first = report.runs[0]
    return render(
        "compare.html.j2",
        figures=compare_figures(report),
        nav=nav,
        title="compare " + " vs ".join(c.run["id"][:10] for c in report.runs),
        runs=report.runs,
        label=label,
        workload=workload_text,
        rows=deltas(report),
        comparisons=report.comparisons,
        first=first,
        pct=_fmt_pct,
        generated_at=report.generated_at,
        link_base="/ui/runs/",
        max_compared=MAX_COMPARED,
    )
