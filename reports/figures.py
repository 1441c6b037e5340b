"""The reports' charts as Plotly figures (plotly.graph_objects; drawn by the bundled
plotly.js in the page). Every figure is built from the gathered data only."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from core.models import Direction
from core.units import clients_text
from reports.data import ClientCounters, RunReport, SecondPoint, StepData

MIB = 1024 * 1024
LAYOUT: dict[str, Any] = {
    "template": "plotly_white",
    "height": 340,
    "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
    "legend": {"orientation": "h", "y": -0.25},
}


class Figure:
    """A chart with its id in the page (tests find it by this id)."""

    def __init__(self, fig_id: str, fig: go.Figure) -> None:
        self.id = fig_id
        self.fig = fig

    def json(self) -> str:
        text: str = self.fig.to_json()
        return text


def _fig(title: str, x: str, y: str, **layout: Any) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, **LAYOUT, **layout)
    return fig


def _seconds(points: list[SecondPoint], origin: float) -> list[float]:
    return [round((p.t_ms - origin) / 1000, 3) for p in points]


def _origin(step: StepData) -> float:
    starts = [p.t_ms - 1000 for c in step.clients for pts in c.series.values() for p in pts[:1]]
    return min(starts) if starts else 0.0


def timeline_figures(step: StepData, heading: str) -> list[Figure]:
    """Per-second IOPS and MiB/s of each client and all clients, common window shaded."""
    origin = _origin(step)
    out = []
    for metric, label, scale in (("iops", "IOPS", 1.0), ("bw_bytes", "MiB/s", MIB)):
        fig = _fig(f"{heading}: {label} per second", "seconds", label)
        fig.update_yaxes(rangemode="tozero")
        for d, points in step.total.items():
            fig.add_scatter(
                x=_seconds(points, origin),
                y=[getattr(p, metric) / scale for p in points],
                name=f"all clients {d}",
                mode="lines+markers",
                line={"width": 3},
            )
        for c in step.clients:
            for d, points in c.series.items():
                fig.add_scatter(
                    x=_seconds(points, origin),
                    y=[getattr(p, metric) / scale for p in points],
                    name=f"client {c.client} ({c.agent_id}) {d}",
                    mode="lines+markers",
                )
        if step.window is not None:
            fig.add_vrect(
                x0=(step.window[0] - origin) / 1000,
                x1=(step.window[1] - origin) / 1000,
                fillcolor="green",
                opacity=0.12,
                line_width=0,
                annotation_text="common window",
                annotation_position="top left",
            )
        out.append(Figure(f"timeline-{metric}-step{step.step}", fig))
    return out


def histogram_figure(step: StepData, aggregate: dict[str, Any] | None, heading: str) -> Figure:
    """The merged completion-latency histogram of the window, p50/p99/p99.9 marked."""
    fig = _fig(f"{heading}: latency histogram (common window)", "latency ms (log)", "I/Os")
    fig.update_xaxes(type="log")
    for d, buckets in step.histogram.items():
        fig.add_bar(x=[k / 1e6 for k, _ in buckets], y=[v for _, v in buckets], name=d)
        lat = ((aggregate or {}).get(d) or {}).get("clat_ns") or {}
        for name in ("p50", "p99", "p99.9"):
            if lat.get(name):
                fig.add_vline(
                    x=lat[name] / 1e6,
                    line_dash="dash",
                    annotation_text=f"{d} {name} {lat[name] / 1e6:.3f} ms",
                    annotation_textangle=-90,
                )
    return Figure(f"histogram-step{step.step}", fig)


def share_figure(aggregate: dict[str, Any], heading: str, step: int) -> Figure:
    """Each client's share of the total and its start skew."""
    per = aggregate.get("per_client") or []
    labels = [f"client {c['client']}" for c in per]
    fig = _fig(f"{heading}: share and start skew", "client", "share of the total %")
    fig.add_bar(x=labels, y=[c["share"] * 100 for c in per], name="share %")
    fig.add_scatter(
        x=labels,
        y=[c.get("start_skew_ms") for c in per],
        name="start skew ms",
        yaxis="y2",
        mode="markers",
        marker={"size": 12, "symbol": "diamond"},
    )
    fig.update_layout(yaxis2={"title": "start skew ms", "overlaying": "y", "side": "right"})
    return Figure(f"share-step{step}", fig)


def ceilings_figure(aggregate: dict[str, Any], heading: str, step: int) -> Figure | None:
    """Utilisation of every limit that applies (100 % = at the limit)."""
    rows = [c for c in aggregate.get("ceilings") or [] if c.get("utilisation") is not None]
    if not rows:
        return None
    fig = _fig(f"{heading}: limits, measured / limit", "utilisation %", "")
    fig.add_bar(
        y=[str(c.get("name") or c.get("kind")) for c in rows],
        x=[c["utilisation"] * 100 for c in rows],
        orientation="h",
        name="utilisation %",
    )
    fig.add_vline(x=90, line_dash="dot", annotation_text="90 %: reached")
    return Figure(f"ceilings-step{step}", fig)


def counters_figure(counters: list[ClientCounters], heading: str, step: int) -> Figure | None:
    """Each client host's CPU busy % and network bytes out/in per second."""
    if not any(c.points for c in counters):
        return None
    origin = min(p.t_ms for c in counters for p in c.points[:1]) - 1000
    fig = _fig(f"{heading}: host counters", "seconds", "CPU busy %")
    for c in counters:
        xs = [(p.t_ms - origin) / 1000 for p in c.points]
        fig.add_scatter(
            x=xs,
            y=[(p.cpu or {}).get("busy") for p in c.points],
            name=f"client {c.client} CPU busy %",
            mode="lines+markers",
        )
        for key, label in (("tx_bytes", "out"), ("rx_bytes", "in")):
            fig.add_scatter(
                x=xs,
                y=[sum(n.get(key, 0.0) for n in p.net.values()) / MIB for p in c.points],
                name=f"client {c.client} net {label} MiB/s",
                yaxis="y2",
                mode="lines",
                line={"dash": "dot"},
            )
    fig.update_layout(yaxis2={"title": "network MiB/s", "overlaying": "y", "side": "right"})
    return Figure(f"counters-step{step}", fig)


def latency_curve_figure(curves: dict[str, Any]) -> Figure | None:
    """Latency against achieved IOPS (a rate sweep, or any sweep of several steps)."""
    points = curves.get("latency") or []
    if len(points) < 2:
        return None
    fig = _fig("latency vs IOPS", "IOPS (all clients)", "latency ms")
    counts = sorted({q["clients"] for q in points})
    for n in counts:  # one curve per client count, along increasing IOPS
        mine = sorted((q for q in points if q["clients"] == n), key=lambda q: q["iops"])
        suffix = f" ({clients_text(n)})" if len(counts) > 1 else ""
        for d in ("read", "write"):
            for p in ("p50", "p99"):
                key = f"{d}_{p}_ns"
                pts = [q for q in mine if q.get(key) is not None]
                if pts:
                    fig.add_scatter(
                        x=[q["iops"] for q in pts],
                        y=[q[key] / 1e6 for q in pts],
                        text=[q.get("point") or f"step {q['step']}" for q in pts],
                        name=f"{d} {p}{suffix}",
                        mode="lines+markers",
                    )
    return Figure("curve-latency", fig)


def scaleout_figure(curves: dict[str, Any]) -> Figure | None:
    """Aggregate IOPS against client count, with linear scaling from the smallest count."""
    points = curves.get("scaleout") or []
    workloads: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        workloads.setdefault(p.get("point") or "", []).append(p)
    if not any(len(v) > 1 for v in workloads.values()):
        return None
    fig = _fig("scale-out", "clients", "IOPS (all clients)")
    for label, pts in workloads.items():
        name = label or "measured"
        xs = [p["clients"] for p in pts]
        fig.add_scatter(x=xs, y=[p["iops"] for p in pts], name=name, mode="lines+markers")
        fig.add_scatter(
            x=xs,
            y=[p["linear_iops"] for p in pts],
            name=f"{name}: linear",
            mode="lines",
            line={"dash": "dash"},
        )
    return Figure("curve-scaleout", fig)


def step_figures(report: RunReport, step: StepData, heading: str) -> list[Figure]:
    agg = next((s["aggregate"] for s in report.run["steps"] if s["step"] == step.step), None)
    out = timeline_figures(step, heading) if step.total else []
    if step.histogram:
        out.append(histogram_figure(step, agg, heading))
    if agg and agg.get("per_client"):
        out.append(share_figure(agg, heading, step.step))
    for extra in (
        ceilings_figure(agg, heading, step.step) if agg else None,
        counters_figure(step.counters, heading, step.step),
    ):
        if extra is not None:
            out.append(extra)
    return out


SERIES_METRICS: tuple[tuple[str, str, float], ...] = tuple(
    (f"{d}.{m}", unit, scale)
    for d in ("read", "write")
    for m, unit, scale in (
        ("iops", "IOPS", 1.0),
        ("bw_bytes", "MiB/s", MIB),
        ("p50", "ms", 1e6),
        ("p99", "ms", 1e6),
        ("p99.9", "ms", 1e6),
    )
)


def series_figures(history: dict[str, Any]) -> list[Figure]:
    """Each metric's history: infrastructure segments shaded, change points (regressions
    and improvements found) as vertical lines, a failed gate as a red cross."""
    rows = history["history"]
    regressions = history.get("regressions") or []
    times = {r["run_id"]: r["time_ms"] for r in rows}
    out = []
    for metric, unit, scale in SERIES_METRICS:
        have = [r for r in rows if r.get(metric) is not None]
        if not have:
            continue
        fig = _fig(f"{metric}", "time (UTC)", unit)
        fig.update_xaxes(type="date")
        fig.add_scatter(
            x=[r["time_ms"] for r in have],
            y=[r[metric] / scale for r in have],
            text=[r["run_id"] for r in have],
            name=metric,
            mode="lines+markers",
        )
        failed = [
            r
            for r in have
            if ((r.get("gate") or {}).get(metric) or {}).get("verdict") == "regression"
        ]
        if failed:
            fig.add_scatter(
                x=[r["time_ms"] for r in failed],
                y=[r[metric] / scale for r in failed],
                name="gate failed",
                mode="markers",
                marker={"symbol": "x", "size": 14, "color": "red"},
            )
        segments = sorted({r["segment"] for r in have})
        for s in segments[1:]:
            first = min(r["time_ms"] for r in have if r["segment"] == s)
            fig.add_vline(x=first, line_dash="dot", annotation_text=f"segment {s}")
        for reg in regressions:
            at = times.get(reg.get("first_run_id", ""))
            if reg.get("metric") == metric and at is not None:
                color = "red" if reg.get("kind") == "regression" else "green"
                fig.add_vline(
                    x=at,
                    line_color=color,
                    annotation_text=f"{reg.get('kind')} {reg.get('change_pct') or 0:+.1f}%",
                )
        out.append(Figure(f"series-{metric}", fig))
    return out


def directions(step: StepData) -> list[Direction]:
    return list(step.total)
