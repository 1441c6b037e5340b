"""Tables for people: per-client figures and the aggregate."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from core.latency import KIND_NAMES, Kind, format_ns, means_text, table_kind
from core.units import clients_text
from tables.ceilings import ceilings_markdown, print_ceilings
from tables.fleet import usage_line
from tables.gate import gate_markdown
from tables.verdicts import repetition_lines, result_verdicts, step_heading

MIB = 1024 * 1024
DIRS = ("read", "write")


def _dir_cells(d: dict[str, Any] | None, kind: Kind = "lat") -> list[str]:
    """IOPS, MiB/s and the ``kind`` latency's p50/p99/p99.9, each in its own unit."""
    if not d:
        return ["-"] * 5
    lat = d.get(f"{kind}_ns") or {}
    return [
        f"{d['iops']:,.0f}",
        f"{d['bw_bytes'] / MIB:,.1f}",
        format_ns(lat.get("p50")),
        format_ns(lat.get("p99")),
        format_ns(lat.get("p99.9")),
    ]


def latency_headers(kind: Kind) -> list[str]:
    """``total p50`` …: every latency column says which latency it is (core.latency)."""
    return [f"{KIND_NAMES[kind]} {p}" for p in ("p50", "p99", "p99.9")]


def _run_rows(run: dict[str, Any]) -> list[dict[str, Any] | None]:
    rows = [(i.get("result") or {}).get(d) for i in run.get("items", []) for d in DIRS]
    agg = run.get("aggregate") or {}
    return rows + [agg.get(d) for d in DIRS]


def run_table(run: dict[str, Any]) -> Table:
    t = Table(title=f"run {run['id']} on {run['target']}: {run['state']}")
    # With several steps each row names its step by what the step swept (issue 11.3).
    steps = {s["step"]: s for s in run.get("steps", [])}
    heading = len(steps) > 1
    kind = table_kind(_run_rows(run))
    columns = ("client", "agent", "state", "dir", "IOPS", "MiB/s", *latency_headers(kind))
    for col in ("step", *columns) if heading else columns:
        t.add_column(
            col, justify="right" if col not in ("step", "agent", "state", "dir") else "left"
        )
    for item in run.get("items", []):
        step = steps.get(item.get("step"))
        lead = [step_heading(step) if step else str(item.get("step"))] if heading else []
        for row in _item_rows(item, kind):
            t.add_row(*lead, *row)
    agg = run.get("aggregate")
    if agg:
        for d in ("read", "write"):
            if agg.get(d):
                t.add_row(
                    *([""] if heading else []),
                    "all",
                    clients_text(agg["clients"]),
                    BASIS_TEXT.get(agg.get("basis", ""), agg.get("basis", "")),
                    d,
                    *_dir_cells(agg[d], kind),
                    style="bold",
                )
    return t


def _item_rows(item: dict[str, Any], kind: Kind) -> list[list[str]]:
    """A client's rows: one per direction it has (one "-" row when it has none)."""
    res = item.get("result") or {}
    dirs = [d for d in ("read", "write") if res.get(d)] or ["-"]
    return [
        [
            str(item["client"]),
            item.get("agent_id") or "-",
            item["state"],
            d,
            *_dir_cells(res.get(d), kind),
        ]
        for d in dirs
    ]


def print_run(run: dict[str, Any], console: Console | None = None) -> None:
    console = console or console_for_stdout()
    console.print(run_table(run))
    steps = run.get("steps", [])
    for s in steps:
        if s.get("failed_reason"):
            console.print(f"[red]{step_heading(s)}: {s['failed_reason']}[/red]")
        elif s.get("aggregate"):
            console.print(aggregate_table(s["aggregate"], step_heading(s)))
            print_aggregate_notes(s["aggregate"], console)
            print_ceilings(s["aggregate"], console)
        for line in result_verdicts(run, s):
            console.print(f"{step_heading(s)}: {line}", markup=False)
    for line in repetition_lines(run):
        console.print(line, markup=False)
    for item in run.get("items", []):
        if item.get("reason") and item["state"] == "failed":
            console.print(f"[red]client {item['client']}: {item['reason']}[/red]")
    usage = usage_line(run)
    if usage:
        console.print(usage, markup=False, emoji=False)


BASIS_TEXT = {"common-window": "common window", "whole-run": "whole run"}


def percentiles_note(d: dict[str, Any], kind: Kind = "clat") -> str:
    """Which I/Os the ``kind`` latency's percentiles describe, and whether they are exact."""
    prefix = "lat_" if kind == "lat" else ""
    basis = str(d.get(f"{prefix}percentiles_basis", "?"))
    exact = d.get(f"{prefix}percentiles_exact", True)
    return BASIS_TEXT.get(basis, basis) + ("" if exact else ", approx.")


def _latency_text(a: dict[str, Any], kind: Kind) -> str:
    lat = a.get(f"{kind}_ns") or {}
    figures = "/".join(format_ns(lat.get(p)) for p in ("p50", "p99", "p99.9"))
    return f"{KIND_NAMES[kind]} p50/p99/p99.9 {figures} ({percentiles_note(a, kind)})"


def aggregate_table(agg: dict[str, Any], title: str = "aggregate") -> Table:
    basis = BASIS_TEXT.get(agg.get("basis", ""), agg.get("basis", ""))
    window = agg.get("window")
    if window:
        basis += f", {window['seconds']:.3f} s window"
    t = Table(
        title=f"{title}: {clients_text(agg['clients'])}, {basis}"
        + (" [PARTIAL]" if agg.get("partial") else "")
    )
    for col in ("client", "source", "IOPS", "MiB/s", "share", "skew ms"):
        t.add_column(col, justify="left" if col == "source" else "right")
    for c in agg.get("per_client", []):
        skew = c.get("start_skew_ms")
        t.add_row(
            str(c["client"]),
            c.get("agent_id") or "-",
            f"{c['iops']:,.0f}",
            f"{c['bw_bytes'] / MIB:,.1f}",
            f"{c['share']:.1%}",
            "-" if skew is None else f"{skew:.1f}",
        )
    for d in ("read", "write"):
        if agg.get(d):
            a = agg[d]
            kinds: list[Kind] = ["lat", "clat"] if a.get("lat_ns") else ["clat"]
            t.add_row(
                "all",
                f"{d}: {_latency_text(a, kinds[0])}",
                f"{a['iops']:,.0f}",
                f"{a['bw_bytes'] / MIB:,.1f}",
                "",
                "",
                style="bold",
            )
            for kind in kinds[1:]:
                t.add_row("", f"{d}: {_latency_text(a, kind)}", "", "", "", "")
            means = means_text(a)
            if means:
                t.add_row("", f"{d}: means {means}", "", "", "", "")
    return t


def print_aggregate_notes(agg: dict[str, Any], console: Console) -> None:
    spread = agg.get("spread")
    if spread:
        console.print(
            f"spread across clients: min {spread['min']:,.0f}, max {spread['max']:,.0f} "
            f"IOPS, CV {spread['cv']:.1%}"
        )
    if agg.get("scaling_efficiency") is not None:
        console.print(
            f"scaling efficiency vs 1 client of the same workload: {agg['scaling_efficiency']:.1%}"
        )
    little = agg.get("littles_law")
    if little and little.get("mode") == "rate-cap":
        style = "yellow" if little["flagged"] else "default"
        console.print(
            f"[{style}]rate cap: {little['achieved_iops']:,.0f} of {little['cap_iops']:,.0f} "
            f"IOPS ({little['ratio']:.1%})[/{style}]"
        )
    elif little and little["flagged"]:
        console.print(
            f"[yellow]Little's law: IOPS x latency implies {little['implied_ios']:.1f} "
            f"I/Os in flight, clients kept {little['outstanding_ios']:.0f}[/yellow]"
        )
    for f in agg.get("failed_clients", []):
        console.print(f"[red]client {f['client']} ({f.get('agent_id')}) failed: {f['error']}[/red]")
    if agg.get("note"):
        console.print(agg["note"])


def console_for_stdout() -> Console:
    # Piped output (CI logs, make demo) would otherwise wrap at 80 columns.
    return Console(width=None if sys.stdout.isatty() else 120)


def curve_kind(points: list[dict[str, Any]]) -> Kind:
    """Total latency when every point has it, else completion."""
    has = [any(f"{d}_lat_p50_ns" in p for d in DIRS) for p in points]
    return "lat" if all(has) else "clat"


def curve_cells(p: dict[str, Any], kind: Kind) -> list[str]:
    return [
        f"{format_ns(p[f'{d}_{kind}_p50_ns'])} / {format_ns(p[f'{d}_{kind}_p99_ns'])}"
        if f"{d}_{kind}_p50_ns" in p
        else "-"
        for d in DIRS
    ]


def curve_headers(kind: Kind) -> list[str]:
    return [f"{d} {KIND_NAMES[kind]} p50 / p99" for d in DIRS]


def latency_table(curves: dict[str, Any]) -> Table:
    t = Table(title="latency vs IOPS")
    kind = curve_kind(curves["latency"])
    for col in ("step", "point", "clients", "IOPS", *curve_headers(kind)):
        t.add_column(col, justify="left" if col == "point" else "right")
    for p in curves["latency"]:
        t.add_row(
            str(p["step"]),
            p.get("point") or "",
            str(p["clients"]),
            f"{p['iops']:,.0f}",
            *curve_cells(p, kind),
        )
    return t


def scaleout_table(curves: dict[str, Any]) -> Table:
    t = Table(title="scale-out (linear = the same workload's smallest client count scaled)")
    for col in ("workload", "clients", "IOPS", "MiB/s", "linear IOPS", "efficiency"):
        t.add_column(col, justify="left" if col == "workload" else "right")
    for p in curves["scaleout"]:
        eff = "-" if p["efficiency"] is None else f"{p['efficiency']:.0%}"
        t.add_row(
            p.get("point") or "-",
            str(p["clients"]),
            f"{p['iops']:,.0f}",
            f"{p['bw_bytes'] / MIB:,.1f}",
            f"{p['linear_iops']:,.0f}",
            eff,
        )
    return t


# ---- markdown: a pipeline's job summary or a PR comment ---------------------------------


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [_md_row(header), _md_row(["---"] * len(header)), *(_md_row(r) for r in rows)]


def _step_md_rows(s: dict[str, Any], kind: Kind) -> list[list[str]]:
    """A step's aggregate, a row per direction (none without an aggregate)."""
    agg = s.get("aggregate")
    if not agg:
        return []
    return [
        [
            str(s["step"]),
            s.get("point") or "-",
            str(agg["clients"]),
            d,
            *_dir_cells(agg[d], kind),
            percentiles_note(agg[d], kind),
        ]
        for d in ("read", "write")
        if agg.get(d)
    ]


def run_markdown(run: dict[str, Any]) -> str:
    icon = {"completed": "✅", "failed": "❌", "cancelled": "⚪"}.get(run["state"], "⏳")
    profile = f" `{run['profile']}`" if run.get("profile") else ""
    lines = [f"### {icon} Benchmark{profile} on `{run['target']}`: {run['state']}", ""]
    who = run.get("requested_by") or {}
    lines.append(
        f"Run `{run['id']}` · engine {run.get('engine', 'fio')} · "
        f"requested by {who.get('name', '?')} via {who.get('door', '?')}"
    )
    if run.get("tags"):
        lines.append("Tags: " + ", ".join(f"`{k}={v}`" for k, v in sorted(run["tags"].items())))
    lines.append("")
    aggs = [s["aggregate"] for s in run.get("steps", []) if s.get("aggregate")]
    kind = table_kind([a.get(d) for a in aggs for d in DIRS])
    rows = [row for s in run.get("steps", []) for row in _step_md_rows(s, kind)]
    if rows:
        header = ["step", "point", "clients", "dir", "IOPS", "MiB/s", *latency_headers(kind)]
        header += ["percentiles"]
        lines += _md_table(header, rows)
    lines += ceilings_markdown(run)
    if run.get("error"):
        lines += ["", f"**Error:** {run['error']}"]
    if run["state"] == "completed":
        lines += gate_markdown(run, _md_table)
    return "\n".join(lines) + "\n"


def _num(v: float | None, metric: str) -> str:
    if v is None:
        return "-"
    if metric.endswith(("p50", "p99", "p99.9", ".mean", ".max")):  # ns
        return format_ns(v)
    if metric.endswith("bw_bytes"):
        return f"{v / MIB:,.1f} MiB/s"
    return f"{v:,.0f}"


def _compare_rows(cmp: dict[str, Any]) -> list[list[str]]:
    return [
        [
            r["metric"],
            _num(r["a"], r["metric"]),
            _num(r["b"], r["metric"]),
            "-" if r["delta_pct"] is None else f"{r['delta_pct']:+.1f}%",
            "-" if r["noise_pct"] is None else f"±{r['noise_pct']:.1f}%",
            r["verdict"],
        ]
        for r in cmp["rows"]
    ]


COMPARE_HEADER = ["metric", "A", "B", "Δ", "noise (1 sd)", "verdict"]


def compare_table(cmp: dict[str, Any]) -> Table:
    t = Table(title=f"A {cmp['a']['id']}  vs  B {cmp['b']['id']}")
    for col in COMPARE_HEADER:
        t.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
    for row in _compare_rows(cmp):
        style = {"worse": "red", "better": "green"}.get(row[-1])
        t.add_row(*row, style=style)
    return t


def compare_markdown(cmp: dict[str, Any]) -> str:
    lines = [f"### Run `{cmp['a']['id']}` vs `{cmp['b']['id']}`", ""]
    lines += _md_table(COMPARE_HEADER, _compare_rows(cmp))
    lines += ["", f"**{cmp['summary']}** (threshold: {cmp['noise_sigmas']:g} x the series sd)"]
    if not cmp["comparable"]:
        lines.append("\n⚠️ The runs differ in workload, targets or clients.")
    return "\n".join(lines) + "\n"
