"""A series' history as charts, and its figures as people read them."""

from __future__ import annotations

from typing import Any

from core.analysis.series import SERIES_PERCENTILES, metric_name, metric_text, metric_value
from core.latency import KIND_NAMES, Kind
from reports.figures import MIB, Figure, new_figure

__all__ = ["metric_text", "metric_value", "series_figures"]

COLOURS = {"p50": "#1f77b4", "p99": "#d62728", "p99.9": "#9467bd"}


def _unit(values: list[float]) -> tuple[str, float]:
    return ("ms", 1e6) if values and max(values) >= 1e6 else ("µs", 1e3)


def series_figures(history: dict[str, Any]) -> list[Figure]:
    """Each direction's IOPS, MiB/s and latency (one chart per kind with p50, p99 and
    p99.9): infrastructure segments marked, change points (regressions and improvements
    found) as vertical lines, a failed gate as a red cross."""
    rows = history["history"]
    regressions = history.get("regressions") or []
    times = {r["run_id"]: r["time_ms"] for r in rows}
    out = []
    kinds: tuple[Kind, ...] = ("lat", "clat")
    for d in ("read", "write"):
        charts: list[tuple[str, str, list[str], float]] = [
            (f"series-{d}.iops", f"{d} IOPS", [f"{d}.iops"], 1.0),
            (f"series-{d}.bw_bytes", f"{d} MiB/s", [f"{d}.bw_bytes"], MIB),
        ]
        for kind in kinds:
            metrics = [f"{d}.{kind}.{p}" for p in SERIES_PERCENTILES]
            values = [float(r[m]) for r in rows for m in metrics if r.get(m) is not None]
            unit, scale = _unit(values)
            title = f"{d} {KIND_NAMES[kind]} latency, {unit}"
            charts.append((f"series-{d}.{kind}", title, metrics, scale))
        for fig_id, title, metrics, scale in charts:
            fig = _series_chart(title, rows, metrics, scale)
            if fig is None:
                continue
            if "latency" in title:
                # p50 and p99.9 can lie decades apart: a log axis shows each one's change.
                fig.update_yaxes(type="log", title=f"{title.rsplit(', ', 1)[-1]} (log scale)")
            _mark(fig, rows, metrics, regressions, times)
            out.append(Figure(fig_id, fig))
    return out


def _series_chart(title: str, rows: list[dict[str, Any]], metrics: list[str], scale: float) -> Any:
    have = [m for m in metrics if any(r.get(m) is not None for r in rows)]
    if not have:
        return None
    fig = new_figure(title, "time (UTC)", title.split(", ")[-1] if ", " in title else title)
    fig.update_xaxes(type="date")
    for m in have:
        mine = [r for r in rows if r.get(m) is not None]
        fig.add_scatter(
            x=[r["time_ms"] for r in mine],
            y=[r[m] / scale for r in mine],
            text=[r["run_id"] for r in mine],
            name=m,
            mode="lines+markers",
            line={"color": COLOURS.get(m.rsplit(".", 1)[-1])} if len(have) > 1 else None,
        )
        _mark_failed_gates(fig, mine, m, scale)
    return fig


def _mark_failed_gates(fig: Any, mine: list[dict[str, Any]], metric: str, scale: float) -> None:
    """A red cross on each run whose gate judged ``metric`` a regression."""
    failed = [
        r for r in mine if ((r.get("gate") or {}).get(metric) or {}).get("verdict") == "regression"
    ]
    if failed:
        fig.add_scatter(
            x=[r["time_ms"] for r in failed],
            y=[r[metric] / scale for r in failed],
            name="gate failed",
            mode="markers",
            marker={"symbol": "x", "size": 14, "color": "red"},
        )


def _mark(
    fig: Any,
    rows: list[dict[str, Any]],
    metrics: list[str],
    regressions: list[dict[str, Any]],
    times: dict[str, int],
) -> None:
    have = [r for r in rows if any(r.get(m) is not None for m in metrics)]
    segments = sorted({r["segment"] for r in have})
    for s in segments[1:]:
        first = min(r["time_ms"] for r in have if r["segment"] == s)
        fig.add_vline(x=first, line_dash="dot", annotation_text=f"segment {s}")
    for reg in regressions:
        at = times.get(reg.get("first_run_id", ""))
        if metric_name(str(reg.get("metric"))) in metrics and at is not None:
            color = "red" if reg.get("kind") == "regression" else "green"
            label = metric_text(str(reg["metric"])).split(" ", 1)[1]
            fig.add_vline(
                x=at,
                line_color=color,
                annotation_text=f"{reg.get('kind')} {label} {reg.get('change_pct') or 0:+.1f}%",
            )
