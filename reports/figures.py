"""The reports' charts as Plotly figures (plotly.graph_objects; drawn by the bundled
plotly.js in the page). Every figure is built from the gathered data only."""

from __future__ import annotations

import math
import statistics
from typing import Any

import plotly.graph_objects as go

from core.latency import KIND_NAMES, format_ns
from core.models import Direction
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


def new_figure(title: str, x: str, y: str, **layout: Any) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, xaxis_title=x, yaxis_title=y, **{**LAYOUT, **layout})
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
        fig = new_figure(f"{heading}: {label} per second", "seconds", label)
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


def _bucket_edges(value: int) -> tuple[float, float]:
    """The range of fio's latency bucket that ``value`` (its middle, fio's stat.c
    ``plat_idx_to_val``) stands for: 1 ns below 128 ns, then 64 buckets per power of two."""
    if value < 128:
        return value - 0.5, value + 0.5
    width = 1 << (value.bit_length() - 7)
    return value - width / 2, value + width / 2


def histogram_figure(step: StepData, aggregate: dict[str, Any] | None, heading: str) -> Figure:
    """The merged latency histogram of the window (total latency where every client has
    it), one bar per fio bucket as wide as the bucket, p50/p99/p99.9 marked."""
    kind = step.histogram_kind
    name = KIND_NAMES[kind]
    fig = new_figure(
        f"{heading}: {name} latency histogram (common window)",
        f"{name} latency, ms (log scale)",
        "I/Os",
    )
    fig.update_xaxes(type="log")
    # A log count axis keeps the tail beyond p99 visible next to the mode.
    fig.update_yaxes(type="log", title="I/Os (log scale)")
    fig.update_layout(bargap=0, height=380)
    for d, buckets in step.histogram.items():
        edges = [_bucket_edges(k) for k, _ in buckets]
        fig.add_bar(
            x=[k / 1e6 for k, _ in buckets],
            y=[v for _, v in buckets],
            # Position-axis units of a log axis are decades: each bar spans its bucket.
            width=[math.log10(hi / lo) for lo, hi in edges],
            name=d,
            marker={"line": {"width": 0}},
        )
        lat = ((aggregate or {}).get(d) or {}).get(f"{kind}_ns") or {}
        for p in ("p50", "p99", "p99.9"):
            value = lat.get(p)
            if not value:
                continue
            x = value / 1e6
            fig.add_shape(type="line", x0=x, x1=x, y0=0, y1=1, yref="paper", line={"dash": "dash"})
            # Annotations on a log axis are placed in decades (log10 of the value): at x
            # itself the label would sit at 10^x.
            fig.add_annotation(
                x=math.log10(x),
                y=1,
                yref="paper",
                text=f"{d} {p} {format_ns(value)}",
                textangle=-90,
                xanchor="right",
                yanchor="top",
                showarrow=False,
                name=f"{d} {p}",
            )
    return Figure(f"histogram-step{step.step}", fig)


def _shares_of_mean(step: StepData) -> list[list[float | None]]:
    """Each client's IOPS in each second, in % of the clients' mean in that second."""
    rows = step.grid
    means: list[float | None] = []
    for i in range(len(step.grid_t)):
        live = [v for r in rows if (v := r.iops[i]) is not None]
        means.append(statistics.fmean(live) if live else None)
    return [
        [
            None if v is None or not m else round(100 * v / m, 1)
            for v, m in zip(r.iops, means, strict=True)
        ]
        for r in rows
    ]


def _client_labels(step: StepData, aggregate: dict[str, Any] | None) -> list[str]:
    skews = {c["client"]: c.get("start_skew_ms") for c in (aggregate or {}).get("per_client") or []}
    return [
        f"client {r.client} ({r.agent_id})"
        + ("" if skews.get(r.client) is None else f", skew {skews[r.client]:.0f} ms")
        for r in step.grid
    ]


def clients_heatmap(step: StepData, aggregate: dict[str, Any] | None, heading: str) -> Figure:
    """Each client's IOPS in each second of the step, as a share of the clients' mean in
    that second: a late start, an early end or a slow client stands out as its row."""
    rows = step.grid
    z = _shares_of_mean(step)
    labels = _client_labels(step, aggregate)
    origin = step.grid_t[0] - 1000 if step.grid_t else 0.0
    fig = new_figure(
        f"{heading}: each client's IOPS per second, % of the clients' mean",
        "seconds",
        "",
        height=max(220, 70 + 40 * len(rows)),
    )
    shares = [v for row in z for v in row if v is not None]
    # At least 75-125 %: a client 1 % off its peers is not a straggler; one at 50 % is.
    spread = max([25.0, *(abs(v - 100) for v in shares)])
    fig.add_heatmap(
        x=[round((t - origin) / 1000, 3) for t in step.grid_t],
        y=labels,
        z=z,
        text=[["" if v is None else f"{v:.0f}%" for v in row] for row in z],
        texttemplate="%{text}",
        customdata=[r.iops for r in rows],
        zmin=100 - spread,
        zmax=100 + spread,
        colorscale="RdBu",
        colorbar={"title": "% of mean"},
        hovertemplate="%{y}<br>second %{x}: %{customdata:,.0f} IOPS (%{z}% of mean)<extra></extra>",
        xgap=1,
        ygap=2,
        name="clients",
    )
    fig.update_yaxes(autorange="reversed")
    return Figure(f"clients-step{step.step}", fig)


def share_figure(aggregate: dict[str, Any], heading: str, step: int) -> Figure:
    """Each client's share of the total and its start skew."""
    per = aggregate.get("per_client") or []
    labels = [f"client {c['client']}" for c in per]
    fig = new_figure(f"{heading}: share and start skew", "client", "share of the total %")
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
    fig = new_figure(f"{heading}: limits, measured / limit", "utilisation %", "")
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
    fig = new_figure(f"{heading}: host counters", "seconds", "CPU busy %")
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


def step_figures(report: RunReport, step: StepData, heading: str) -> list[Figure]:
    agg = next((s["aggregate"] for s in report.run["steps"] if s["step"] == step.step), None)
    out = timeline_figures(step, heading) if step.total else []
    if len(step.grid) > 1:
        out.append(clients_heatmap(step, agg, heading))
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


def directions(step: StepData) -> list[Direction]:
    return list(step.total)
