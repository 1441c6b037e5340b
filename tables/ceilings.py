"""What bound each step, for people: one line naming the limit reached (or the nearest),
and a table of every limit that applies (README, "What bound the run")."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from core.latency import format_ns

MIB = 1 << 20
KIND_TEXT = {
    "target": "the target",
    "client-network": "the clients' network",
    "client-cpu": "the clients' CPU",
    "vm-disk": "the VM's disk limit",
}


def figure(value: float | None, metric: str) -> str:
    if value is None:
        return "-"
    if metric == "bw_bytes":
        return f"{value / MIB:,.1f} MiB/s"
    if metric == "cpu_pct":
        return f"{value:.1f} %"
    return f"{value:,.0f} IOPS"


def _metric_of(agg: dict[str, Any], name: str) -> str:
    found = next((c for c in agg.get("ceilings") or [] if c["name"] == name), None)
    return str(found["metric"]) if found else "bw_bytes"


def bound_line(agg: dict[str, Any]) -> str | None:
    """``bound by the target (target capped read throughput): 40.0 of 40.0 MiB/s (100%)``."""
    b = agg.get("bound_by")
    if not b:
        return None
    if b.get("utilisation") is None:
        return "bound by: no limit known (declare the target's limits or facts; VM size from IMDS)"
    metric = _metric_of(agg, b["name"])
    share = (
        f"{figure(b['measured'], metric)} of {figure(b['limit'], metric)} ({b['utilisation']:.0%})"
    )
    if b["kind"] == "none":
        return f"no limit reached; nearest: {b['name']}, {share}"
    return f"bound by {KIND_TEXT.get(b['kind'], b['kind'])} ({b['name']}): {share}"


def knee_line(agg: dict[str, Any]) -> str | None:
    k = agg.get("knee")
    if not k:
        return None
    return (
        f"latency knee: {k.get('latency', 'completion')} p99 {format_ns(k['p99_ns'])}, "
        f"{k['ratio']:.1f}x step {k['previous_step']}'s, before any known limit was reached"
    )


def ceilings_rows(agg: dict[str, Any]) -> list[list[str]]:
    return [
        [
            c["name"] + ("" if c["applies"] else " (not a bound)"),
            c["direction"],
            figure(c["measured"], c["metric"]),
            figure(c["limit"], c["metric"]),
            f"{c['utilisation']:.0%}",
        ]
        for c in sorted(agg.get("ceilings") or [], key=lambda c: -c["utilisation"])
    ]


HEADER = ["limit", "dir", "measured", "limit value", "used"]


def ceilings_table(agg: dict[str, Any]) -> Table:
    t = Table(title="limits that apply")
    for col in HEADER:
        t.add_column(col, justify="left" if col in ("limit", "dir") else "right")
    for row in ceilings_rows(agg):
        t.add_row(*row)
    return t


def print_ceilings(agg: dict[str, Any], console: Console) -> None:
    line = bound_line(agg)
    if line is None:
        return
    style = "yellow" if (agg.get("bound_by") or {}).get("kind") == "none" else "bold"
    console.print(f"[{style}]{line}[/{style}]")
    if agg.get("ceilings"):
        console.print(ceilings_table(agg))
    knee = knee_line(agg)
    if knee:
        console.print(f"[yellow]{knee}[/yellow]")


def ceilings_markdown(run: dict[str, Any]) -> list[str]:
    """The "What bound the run" section of a run's markdown summary."""
    lines: list[str] = []
    for s in run.get("steps", []):
        agg = s.get("aggregate") or {}
        line = bound_line(agg)
        if line is None:
            continue
        lines.append(f"- step {s['step']}: {line}")
        knee = knee_line(agg)
        if knee:
            lines.append(f"  - {knee}")
    return ["", "#### What bound the run", "", *lines] if lines else []
