"""Tables for people: per-client figures and the aggregate."""

from __future__ import annotations

import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from core.models import Workload
from core.runs.working_set import human_bytes, working_set
from core.units import clients_text
from tables.ceilings import ceilings_markdown, print_ceilings
from tables.fleet import usage_line
from tables.gate import gate_markdown
from tables.verdicts import repetition_lines, result_verdicts, step_heading

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
    # With several steps each row names its step by what the step swept (issue 11.3).
    steps = {s["step"]: s for s in run.get("steps", [])}
    heading = len(steps) > 1
    columns = ("client", "agent", "state", "dir", "IOPS", "MiB/s", "p50 ms", "p99 ms", "p99.9 ms")
    for col in ("step", *columns) if heading else columns:
        t.add_column(
            col, justify="right" if col not in ("step", "agent", "state", "dir") else "left"
        )
    for item in run.get("items", []):
        res = item.get("result") or {}
        dirs = [d for d in ("read", "write") if res.get(d)] or ["-"]
        step = steps.get(item.get("step"))
        lead = [step_heading(step) if step else str(item.get("step"))] if heading else []
        for d in dirs:
            t.add_row(
                *lead,
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
                    *([""] if heading else []),
                    "all",
                    clients_text(agg["clients"]),
                    BASIS_TEXT.get(agg.get("basis", ""), agg.get("basis", "")),
                    d,
                    *_dir_cells(agg[d]),
                    style="bold",
                )
    return t


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


def percentiles_note(d: dict[str, Any]) -> str:
    """Which I/Os the percentiles describe, and whether they are exact."""
    basis = str(d.get("percentiles_basis", "?"))
    return BASIS_TEXT.get(basis, basis) + ("" if d.get("percentiles_exact", True) else ", approx.")


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
            t.add_row(
                "all",
                f"{d}: p50/p99/p99.9 {_ms(a['clat_ns']['p50'])}/"
                f"{_ms(a['clat_ns']['p99'])}/{_ms(a['clat_ns']['p99.9'])} ms "
                f"({percentiles_note(a)})",
                f"{a['iops']:,.0f}",
                f"{a['bw_bytes'] / MIB:,.1f}",
                "",
                "",
                style="bold",
            )
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


def latency_table(curves: dict[str, Any]) -> Table:
    t = Table(title="latency vs IOPS")
    for col in ("step", "point", "clients", "IOPS", "read p50/p99 ms", "write p50/p99 ms"):
        t.add_column(col, justify="left" if col == "point" else "right")
    for p in curves["latency"]:
        cells = []
        for d in ("read", "write"):
            cells.append(
                f"{_ms(p[d + '_p50_ns'])}/{_ms(p[d + '_p99_ns'])}" if d + "_p50_ns" in p else "-"
            )
        t.add_row(
            str(p["step"]), p.get("point") or "", str(p["clients"]), f"{p['iops']:,.0f}", *cells
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


def profile_working_set(p: dict[str, Any]) -> str:
    """What one client's files hold on one mount: fio's jobs each have a file, DiskSpd's
    threads share the profile's files (the engine that holds more is shown); a metadata
    profile's tree as files (and their bytes, when they have any)."""
    w = Workload.model_validate(p["workload"])
    if w.metadata is not None:
        files = w.numjobs * w.metadata.files_per_dir
        size = f", {human_bytes(files * w.metadata.file_size)}" if w.metadata.file_size else ""
        return f"{files:,} files{size}"
    sizes = {e: working_set(e, w, 1, p.get("files_per_target", 1)) for e in p["engines"]}
    return human_bytes(max(sizes.values()))


def profile_workload(p: dict[str, Any]) -> str:
    """What the profile does, in the words fio's options use."""
    w = p["workload"]
    md = w.get("metadata")
    if md:
        ops = "/".join(md["ops"])
        return f"metadata {ops}, {w['numjobs']} x {md['files_per_dir']:,} files"
    rw = w["rw"] + (
        f" {w['rwmixread']}/{100 - w['rwmixread']}" if w["rw"] in ("rw", "randrw") else ""
    )
    return f"{rw} {w['bs']}, {w['numjobs']} x {w['iodepth']}"


def profiles_table(profiles: list[dict[str, Any]]) -> Table:
    """The name is what one types: never cut, whatever the terminal's width."""
    t = Table(title="workload profiles")
    longest = max((len(p["name"]) for p in profiles), default=4)
    t.add_column("name", no_wrap=True, min_width=longest)
    t.add_column("v", justify="right")
    t.add_column("workload", overflow="fold")
    t.add_column("size")
    t.add_column("per client")
    t.add_column("s", justify="right")
    t.add_column("fill")
    t.add_column("engines")
    for p in profiles:
        w = p["workload"]
        t.add_row(
            p["name"],
            str(p["version"]),
            profile_workload(p),
            "-" if w.get("metadata") else w["size"],
            profile_working_set(p),
            f"{w['ramp_time']}+{w['runtime']}",
            "yes" if p["fill"] else "",
            ", ".join(p["engines"]),
        )
    t.caption = (
        "workload: rw, bs, jobs x depth (metadata: jobs x files per directory); size: each "
        "job's file; per client: what its files hold on each mount; s: warm-up + measured"
    )
    return t


# ---- markdown: a pipeline's job summary or a PR comment ---------------------------------


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [_md_row(header), _md_row(["---"] * len(header)), *(_md_row(r) for r in rows)]


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
    rows = []
    for s in run.get("steps", []):
        agg = s.get("aggregate")
        if not agg:
            continue
        for d in ("read", "write"):
            if agg.get(d):
                rows.append(
                    [
                        str(s["step"]),
                        s.get("point") or "-",
                        str(agg["clients"]),
                        d,
                        *_dir_cells(agg[d]),
                        percentiles_note(agg[d]),
                    ]
                )
    if rows:
        header = ["step", "point", "clients", "dir", "IOPS", "MiB/s", "p50 ms", "p99 ms"]
        header += ["p99.9 ms", "percentiles"]
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
    if metric.endswith(("p50", "p99", "p99.9", ".mean")):  # ns; .mean: a metadata phase
        return f"{v / 1e6:.3f} ms"
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
