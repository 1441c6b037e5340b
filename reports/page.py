"""Reports as self-contained HTML: plotly.js inlined once, the figures' JSON beside it, no
other request (it works air-gapped and as a pipeline artifact)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from plotly.offline import get_plotlyjs
from rich.console import Console

from core.latency import KIND_NAMES, Kind, format_ns, table_kind
from core.units import clients_text
from reports.curve_figures import grid_figures, latency_curve_figure, scaleout_figure
from reports.data import RunReport, SeriesReport
from reports.figures import Figure, step_figures
from reports.series_figures import metric_text, metric_value, series_figures
from tables.ceilings import print_ceilings
from tables.runs import aggregate_table, latency_table, run_table, scaleout_table
from tables.verdicts import step_heading, verdict_lines

RUN_LINK = "/ui/runs/"


@cache
def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("reports", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        ns=format_ns, num=_num, when=_when, metric_text=metric_text, metric_value=metric_value
    )
    return env


@cache
def plotly_js() -> str:
    """plotly.min.js as the plotly package bundles it."""
    text: str = get_plotlyjs()
    return text


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _when(t_ms: int) -> str:
    return datetime.fromtimestamp(t_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def render(
    template: str, *, figures: list[Figure], nav: bool, plotly: bool = False, **values: Any
) -> str:
    """A page; with figures (or ``plotly``: a page drawing its own), plotly.js is inlined
    once at the top."""
    inline = plotly_js() if figures or plotly else ""
    return (
        _env().get_template(template).render(figures=figures, nav=nav, plotly_js=inline, **values)
    )


def cli_tables(run: dict[str, Any], curves: dict[str, Any]) -> str:
    """The tables ``benchctl show`` prints, exported by rich as HTML (inline styles)."""
    console = Console(record=True, width=140, file=io.StringIO(), color_system="truecolor")
    console.print(run_table(run))
    for s in run.get("steps", []):
        if s.get("aggregate"):
            console.print(aggregate_table(s["aggregate"], step_heading(s)))
            print_ceilings(s["aggregate"], console)
    if len(curves.get("latency") or []) > 1:
        console.print(latency_table(curves), scaleout_table(curves))
    html: str = console.export_html(inline_styles=True, code_format='<pre class="cli">{code}</pre>')
    return html


def headline_kind(run: dict[str, Any]) -> Kind:
    """The latency the results table shows: total where every step has it."""
    aggs = [s["aggregate"] for s in run.get("steps", []) if s.get("aggregate")]
    return table_kind([a.get(d) for a in aggs for d in ("read", "write")])


def headline(run: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    kind = headline_kind(run)
    for s in run.get("steps", []):
        agg = s.get("aggregate")
        if not agg:
            continue
        bound = agg.get("bound_by") or {}
        for d in ("read", "write"):
            a = agg.get(d)
            if a:
                lat = a[f"{kind}_ns"]
                rows.append(
                    {
                        "step": s["step"],
                        "point": s.get("point") or "",
                        "clients": agg["clients"],
                        "dir": d,
                        "iops": a["iops"],
                        "bw_bytes": a["bw_bytes"],
                        "p50": lat.get("p50"),
                        "p99": lat.get("p99"),
                        "p999": lat.get("p99.9"),
                        "basis": agg.get("basis", ""),
                        "bound_by": _bound_text(bound),
                    }
                )
    return rows


def run_figures(report: RunReport) -> list[Figure]:
    figures = grid_figures(report.run)
    if not figures:  # a two-field sweep is its heatmaps, not a curve
        figures = [f for f in (latency_curve_figure(report.curves),) if f]
    figures += [f for f in (scaleout_figure(report.curves),) if f]
    steps = {s["step"]: s for s in report.run["steps"]}
    for step in report.steps:
        figures += step_figures(report, step, step_heading(steps[step.step]))
    return figures


def run_page(report: RunReport, *, nav: bool = False) -> str:
    run = report.run
    return render(
        "run.html.j2",
        figures=run_figures(report),
        nav=nav,
        title=f"run {run['id']}",
        run=run,
        generated_at=report.generated_at,
        headline=headline(run),
        latency_name=KIND_NAMES[headline_kind(run)],
        verdicts=verdict_lines(run),
        cli_tables=cli_tables(run, report.curves),
        target_facts=json.dumps(report.target_facts.model_dump(mode="json"), indent=2)
        if report.target_facts
        else "",
        request_json=json.dumps(
            {"request": run.get("request"), "resolved workload": run.get("workload")}, indent=2
        ),
    )


def workload_text(doc: dict[str, Any]) -> str:
    """``randread 4k 1x4`` (rw, block size, jobs x depth), with the profile when named."""
    w = doc.get("workload") or {}
    if not w:
        return "-"
    profile = f"{doc['profile']}: " if doc.get("profile") else ""
    meta = (w.get("metadata") or {}).get("op")
    what = f"metadata {meta}" if meta else f"{w.get('rw')} {w.get('bs')}"
    rate = f" @ {w['rate_iops']:,} IOPS" if w.get("rate_iops") else ""
    return f"{profile}{what} {w.get('numjobs')}x{w.get('iodepth')}{rate}"


def series_name(doc: dict[str, Any]) -> str:
    """A series as people name it: ``scratch · randread 4k 1x4 · 2 clients``."""
    parts = [str(doc.get("target") or "?"), workload_text(doc)]
    if doc.get("clients"):
        parts.append(clients_text(int(doc["clients"])))
    if doc.get("engine") and doc["engine"] != "fio":
        parts.append(str(doc["engine"]))
    return " · ".join(parts)


def series_page(report: SeriesReport, *, nav: bool = False) -> str:
    h = report.history
    return render(
        "series.html.j2",
        figures=series_figures(h),
        nav=nav,
        title=f"series {series_name(h)}",
        name=series_name(h) if h.get("target") else "",
        h=h,
        generated_at=report.generated_at,
        link_base=RUN_LINK,
    )


def _bound_text(bound: dict[str, Any]) -> str:
    """``target (target vol1 throughput, 99%)``, or ``none reached (nearest: …, 84%)``."""
    if not bound:
        return ""
    share = f", {bound['utilisation']:.0%}" if bound.get("utilisation") is not None else ""
    if bound.get("kind") == "none":
        nearest = bound.get("name")
        return f"none reached (nearest: {nearest}{share})" if nearest else "no limit known"
    return f"{bound.get('kind')} ({bound.get('name')}{share})"
