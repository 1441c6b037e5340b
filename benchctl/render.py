"""Tables for people: per-client figures and the aggregate."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.table import Table

MIB = 1024 * 1024


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f}"


def _dir_cells(d: dict[str, Any] | None) -> list[str]:
    if not d:
        return ["-"] * 5
    lat = d.get("clat_ns", {})
    return [
        f"{d['iops']:,.0f}",
        f"{d['bw_bytes'] / MIB:,.1f}",
        _ms(lat.get("p50")),
        _ms(lat.get("p99")),
        _ms(lat.get("p99.9")),
    ]


def run_table(run: dict[str, Any]) -> Table:
    t = Table(title=f"run {run['id']} on {run['target']}: {run['state']}")
    for col in ("client", "agent", "state", "dir", "IOPS", "MiB/s", "p50 ms", "p99 ms", "p99.9 ms"):
        t.add_column(col, justify="right" if col not in ("agent", "state", "dir") else "left")
    for item in run.get("items", []):
        res = item.get("result") or {}
        dirs = [d for d in ("read", "write") if res.get(d)] or ["-"]
        for d in dirs:
            t.add_row(
                str(item["client"]),
                item.get("agent_id") or "-",
                item["state"],
                d,
                *_dir_cells(res.get(d)),
            )
    agg = run.get("aggregate")
    if agg:
        for d in ("read", "write"):
            if agg.get(d):
                t.add_row(
                    "all",
                    f"{agg['clients']} clients",
                    agg.get("basis", ""),
                    d,
                    *_dir_cells(agg[d]),
                    style="bold",
                )
    return t


def print_run(run: dict[str, Any], console: Console | None = None) -> None:
    # Piped output (CI logs, make demo) would otherwise wrap at 80 columns.
    console = console or Console(width=None if sys.stdout.isatty() else 120)
    console.print(run_table(run))
    for item in run.get("items", []):
        if item.get("reason") and item["state"] == "failed":
            console.print(f"[red]client {item['client']}: {item['reason']}[/red]")
