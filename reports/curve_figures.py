"""A run's curves as charts: latency against IOPS (as Vdbench draws its curves),
throughput against clients, and a two-field sweep as heatmaps (as fio-plot draws them)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from core.latency import KIND_NAMES, format_ns
from core.units import clients_text, parse_size
from reports.figures import Figure, new_figure
from tables.runs import curve_kind

CURVE_PERCENTILES = ("p50", "p99", "p99.9")
# One colour per percentile, so a percentile is the same colour on every curve.
COLOURS = {"p50": "#1f77b4", "p99": "#d62728", "p99.9": "#9467bd", "max": "#555555"}
DASHES = ("solid", "dash", "dot", "dashdot")
_RATE = re.compile(r"rate=(\d+)%")


_PAIR = re.compile(r"^\w+=([^,]+),(\w+=[^,]+)$")


def _number(m: re.Match[str] | None) -> float:
    try:
        return float(m.group(1)) if m else 0.0
    except ValueError:  # a size such as 4k
        return float(parse_size(m.group(1))) if m else 0.0


def _rate_pct(point: dict[str, Any]) -> int:
    m = _RATE.match(str(point.get("point") or ""))
    return int(m.group(1)) if m else 0


Group = tuple[str, list[dict[str, Any]]]


def _grid_groups(
    points: Sequence[dict[str, Any]], grid: Sequence[re.Match[str] | None]
) -> list[Group]:
    # A two-field sweep: one curve per value of the second field over the first's
    # values (fio-plot's 2D view of its grid), e.g. numjobs=2 over iodepth 1, 4, 16.
    outer = list(dict.fromkeys(m.group(2) for m in grid if m))
    return [
        (
            o,
            sorted(
                (p for p, m in zip(points, grid, strict=True) if m and m.group(2) == o),
                key=lambda p: _number(_PAIR.match(str(p["point"]))),
            ),
        )
        for o in outer
    ]


def _rate_groups(points: Sequence[dict[str, Any]]) -> list[Group]:
    counts = sorted({p["clients"] for p in points})
    return [
        (
            clients_text(n) if len(counts) > 1 else "",
            sorted(
                (p for p in points if p["clients"] == n and p.get("mode") == "rate"),
                key=_rate_pct,
            ),
        )
        for n in counts
    ]


def _workload_groups(points: Sequence[dict[str, Any]]) -> list[Group]:
    labels = list(dict.fromkeys(str(p.get("point") or "") for p in points))
    return [
        (
            label if len(labels) > 1 else "",
            sorted(
                (p for p in points if str(p.get("point") or "") == label),
                key=lambda p: (p["clients"], p["step"]),
            ),
        )
        for label in labels
    ]


def curve_groups(points: Sequence[dict[str, Any]]) -> list[Group]:
    """The curves a run's points make, each in the order its load grows:
    - a rate sweep: one curve per client count over its rate points, lowest rate first
      (the unthrottled step that found the maximum is not on it: it is drawn apart);
    - a two-field sweep: one curve per value of its second field;
    - a client sweep: one curve per workload over its client counts;
    - otherwise (a field sweep on one client count): one curve over the steps."""
    grid = [_PAIR.match(str(p.get("point") or "")) for p in points]
    if points and all(grid):
        return _grid_groups(points, grid)
    if any(p.get("mode") == "rate" for p in points):
        return _rate_groups(points)
    if len({p["clients"] for p in points}) > 1:
        return _workload_groups(points)
    return [("", sorted(points, key=lambda p: p["step"]))]


def _point_text(p: dict[str, Any], by_clients: bool) -> str:
    if by_clients:
        return clients_text(p["clients"])
    return str(p.get("point") or f"step {p['step']}").replace("rate=", "")


def _add_curve(
    fig: Any, kind: str, group: int, label: str, mine: list[dict[str, Any]], by_clients: bool
) -> None:
    """One curve's lines: one per direction and percentile its points all have."""
    suffix = f" ({label})" if label else ""
    for d in ("read", "write"):
        for p in CURVE_PERCENTILES:
            key = f"{d}_{kind}_{p}_ns"
            pts = [q for q in mine if q.get(key) is not None]
            if not pts:
                continue
            fig.add_scatter(
                x=[q["iops"] for q in pts],
                y=[q[key] / 1e6 for q in pts],
                text=[_point_text(q, by_clients) for q in pts],
                hovertemplate="%{text}: %{x:,.0f} IOPS, %{y:.4g} ms<extra>%{fullData.name}</extra>",
                name=f"{d} {p}{suffix}",
                # The top percentile's points say what they are (rate, clients, value).
                mode="lines+markers+text" if p == "p99.9" else "lines+markers",
                textposition="top center",
                line={"color": COLOURS[p], "dash": DASHES[group % len(DASHES)]},
            )


def _add_unthrottled(fig: Any, kind: str, points: Sequence[dict[str, Any]]) -> None:
    """A rate sweep's unthrottled steps (the maximum) as markers, never joined to a curve."""
    for d in ("read", "write"):
        top = [q for q in points if q.get("mode") == "rate-max" and f"{d}_{kind}_p99_ns" in q]
        for p in CURVE_PERCENTILES:
            key = f"{d}_{kind}_{p}_ns"
            if top and all(key in q for q in top):
                fig.add_scatter(
                    x=[q["iops"] for q in top],
                    y=[q[key] / 1e6 for q in top],
                    text=[f"unthrottled, {clients_text(q['clients'])}" for q in top],
                    hovertemplate="%{text}: %{x:,.0f} IOPS, %{y:.4g} ms<extra></extra>",
                    name=f"{d} {p} unthrottled (max IOPS)",
                    mode="markers",
                    marker={"color": COLOURS[p], "symbol": "star-open", "size": 13},
                )


def latency_curve_figure(curves: dict[str, Any]) -> Figure | None:
    """Latency against achieved IOPS: one connected line per percentile (p50, p99, p99.9)
    of each curve, total latency where every point has it; a rate sweep's unthrottled step
    (the maximum) as markers apart, never joined to the curve."""
    points = curves.get("latency") or []
    if len(points) < 2:
        return None
    kind = curve_kind(points)
    name = KIND_NAMES[kind]
    y_title = f"{name} latency, ms (log scale)"
    fig = new_figure(f"{name} latency vs IOPS", "IOPS (all clients)", y_title)
    # p50 and p99.9 can lie two decades apart: on a linear axis p50 is a flat line at 0.
    fig.update_yaxes(type="log")
    by_clients = len({p["clients"] for p in points}) > 1 and not any(
        p.get("mode") == "rate" for p in points
    )
    for g, (label, mine) in enumerate(curve_groups(points)):
        _add_curve(fig, kind, g, label, mine, by_clients)
    _add_unthrottled(fig, kind, points)
    return Figure("curve-latency", fig)


def scaleout_figure(curves: dict[str, Any]) -> Figure | None:
    """Aggregate IOPS against client count, with linear scaling from the smallest count."""
    points = curves.get("scaleout") or []
    workloads: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        workloads.setdefault(p.get("point") or "", []).append(p)
    if not any(len(v) > 1 for v in workloads.values()):
        return None
    fig = new_figure("scale-out", "clients", "IOPS (all clients)")
    fig.update_xaxes(dtick=1)
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


def _grid_cells(
    run: dict[str, Any], fx: str, fy: str
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The kept steps' aggregates by their values of the two fields."""
    cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in run.get("steps") or []:
        agg = s.get("aggregate")
        if not agg or agg.get("discarded"):
            continue
        w = agg.get("workload") or {}
        cells.setdefault((str(w.get(fx)), str(w.get(fy))), []).append(agg)
    return cells


def grid_figures(run: dict[str, Any]) -> list[Figure]:
    """A two-field sweep (``sweep.grid``, e.g. iodepth x numjobs) as fio-plot draws one:
    a heatmap of IOPS and one of total p99 latency over the two fields' values, each cell
    labelled with its figure (repetitions averaged)."""
    grid = ((run.get("request") or {}).get("sweep") or {}).get("grid")
    if not grid:
        return []
    fx, fy = grid[0]["field"], grid[1]["field"]
    xs = [str(v) for v in grid[0]["values"]]
    ys = [str(v) for v in grid[1]["values"]]
    cells = _grid_cells(run, fx, fy)
    iops = [[_mean(cells.get((x, y)), _iops) for x in xs] for y in ys]
    p99 = [[_mean(cells.get((x, y)), _p99) for x in xs] for y in ys]
    out = []
    for fig_id, title, z, text, scale in (
        ("grid-iops", "IOPS (all clients)", iops, _texts(iops, lambda v: f"{v:,.0f}"), "Blues"),
        ("grid-p99", "total p99 latency", p99, _texts(p99, format_ns), "Reds"),
    ):
        fig = new_figure(f"{fx} x {fy}: {title}", fx, fy, height=360)
        fig.add_heatmap(
            x=xs,
            y=ys,
            z=z,
            text=text,
            texttemplate="%{text}",
            colorscale=scale,
            hovertemplate=f"{fx}=%{{x}}, {fy}=%{{y}}: %{{text}}<extra></extra>",
            name=title,
        )
        fig.update_xaxes(type="category")
        fig.update_yaxes(type="category")
        out.append(Figure(fig_id, fig))
    return out


def _iops(agg: dict[str, Any]) -> float:
    return float(sum(agg[d]["iops"] for d in ("read", "write") if agg.get(d)))


def _p99(agg: dict[str, Any]) -> float | None:
    values = [
        (agg[d].get("lat_ns") or agg[d]["clat_ns"]).get("p99")
        for d in ("read", "write")
        if agg.get(d)
    ]
    values = [v for v in values if v is not None]
    return max(values) if values else None


def _mean(aggs: list[dict[str, Any]] | None, figure: Any) -> float | None:
    values = [v for v in (figure(a) for a in aggs or []) if v is not None]
    return sum(values) / len(values) if values else None


def _texts(z: list[list[float | None]], fmt: Any) -> list[list[str]]:
    return [["" if v is None else str(fmt(v)) for v in row] for row in z]
