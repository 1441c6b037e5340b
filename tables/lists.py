"""benchctl list's table and the curves as markdown."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from core.latency import KIND_NAMES, format_ns, table_kind
from tables.runs import curve_cells, curve_headers, curve_kind

MIB = 1024 * 1024


def _md(header: list[str], rows: list[list[str]]) -> list[str]:
    def row(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [row(header), row(["---"] * len(header)), *(row(r) for r in rows)]


def curves_markdown(curves: dict[str, Any]) -> str:
    lines = [f"### Curves of run `{curves['run_id']}`", "", "**Latency vs IOPS**", ""]
    rows = []
    kind = curve_kind(curves["latency"])
    for p in curves["latency"]:
        rows.append([str(p["step"]), p.get("point") or "", str(p["clients"]), f"{p['iops']:,.0f}"])
        rows[-1] += curve_cells(p, kind)
    lines += _md(["step", "point", "clients", "IOPS", *curve_headers(kind)], rows)
    lines += ["", "**Scale-out** (linear = the same workload's smallest client count scaled)", ""]
    rows = [
        [
            p.get("point") or "-",
            str(p["clients"]),
            f"{p['iops']:,.0f}",
            f"{p['bw_bytes'] / MIB:,.1f}",
            f"{p['linear_iops']:,.0f}",
            "-" if p["efficiency"] is None else f"{p['efficiency']:.0%}",
        ]
        for p in curves["scaleout"]
    ]
    lines += _md(["workload", "clients", "IOPS", "MiB/s", "linear IOPS", "efficiency"], rows)
    for r in curves.get("repetitions") or []:
        lines.append(
            f"\nSpread across {r['repetitions']} repetitions ({r['clients']} clients"
            f"{', ' + r['point'] if r['point'] else ''}): CV {r['cv']:.1%}"
        )
    return "\n".join(lines) + "\n"


def headline(run: dict[str, Any]) -> dict[str, Any]:
    """A run's workload, client counts and last step's IOPS, MiB/s and worst p99."""
    w = run.get("workload") or {}
    agg = run.get("aggregate") or {}
    dirs = [agg[d] for d in ("read", "write") if agg.get(d)]
    counts = sorted({s["clients"] for s in run.get("steps", [])})
    kind = table_kind(dirs)
    p99s = [d[f"{kind}_ns"]["p99"] for d in dirs if d[f"{kind}_ns"].get("p99") is not None]
    return {
        "workload": f"{w.get('rw', '?')} {w.get('bs', '?')} {w.get('numjobs', '?')}x"
        f"{w.get('iodepth', '?')}"
        if w
        else "-",
        "clients": ",".join(map(str, counts)) or "-",
        "iops": sum(d["iops"] for d in dirs) if dirs else None,
        "bw_bytes": sum(d["bw_bytes"] for d in dirs) if dirs else None,
        "p99_ns": max(p99s) if p99s else None,
        "p99_kind": KIND_NAMES[kind],
    }


def list_table(runs: list[dict[str, Any]]) -> Table:
    t = Table(title="runs, newest first")
    for col in ("run", "state", "target", "workload", "clients", "IOPS", "MiB/s", "p99"):
        right = col in ("IOPS", "MiB/s", "p99")
        t.add_column(col, justify="right" if right else "left", no_wrap=col == "run")
    t.add_column("created (UTC)", no_wrap=True)
    for r in runs:
        h = r["headline"]
        t.add_row(
            r["id"],
            r["state"],
            r["target"],
            h["workload"],
            h["clients"],
            "-" if h["iops"] is None else f"{h['iops']:,.0f}",
            "-" if h["bw_bytes"] is None else f"{h['bw_bytes'] / MIB:,.1f}",
            "-" if h["p99_ns"] is None else f"{h['p99_kind']} {format_ns(h['p99_ns'])}",
            str(r["created_at"])[:16].replace("T", " "),
        )
    return t
