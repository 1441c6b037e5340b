"""``benchctl agents``: the agent registry and the pools as tables; a run's client VM time."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.table import Table


def _ago(ms: int | None, now_ms: int) -> str:
    return "" if ms is None else f"{max(0, now_ms - ms) / 1000:.0f} s ago"


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.3f} h" if seconds >= 36 else f"{seconds:.1f} s"


def agents_table(view: dict[str, Any]) -> Table:
    now = int(time.time() * 1000)
    t = Table(title="agents")
    for col in ("agent", "pool", "status", "state", "mounts", "engines", "os", "VM", "CPUs"):
        t.add_column(col)
    t.add_column("last seen", justify="right")
    t.add_column("VM time", justify="right")
    for a in view["agents"]:
        mounts = ", ".join(
            f"{m['alias']} ({m['fstype']}{'' if m['usable'] else ', unusable'})"
            for m in a["mounts"]
        )
        state = a["state"] + (f" {a['item_id']}" if a.get("item_id") else "")
        vm = " ".join(x for x in (a.get("vm_size"), a.get("region")) if x) or "-"
        t.add_row(
            a["id"],
            a["pool"],
            a["status"],
            state,
            mounts,
            ", ".join(a["engines"]),
            a["os"],
            vm,
            str(a["cpu_count"]),
            _ago(a["last_seen_ms"], now),
            _hours(a["used_s"]),
        )
    return t


def pools_table(view: dict[str, Any]) -> Table:
    t = Table(title="pools")
    for col in ("pool", "kind", "size", "live", "busy", "VM time", "price/h", "cost"):
        t.add_column(col, justify="left" if col in ("pool", "kind") else "right")
    for p in view["pools"]:
        kind = f"elastic {p['min']}..{p['size']}" if p["elastic"] else "fixed"
        t.add_row(
            p["pool"],
            kind,
            "-" if p["size"] is None else str(p["size"]),
            str(p["live"]),
            str(p["busy"]),
            _hours(p["used_s"]),
            "-" if p["price_per_hour"] is None else f"{p['price_per_hour']:.4f}",
            "-" if p["cost"] is None else f"{p['cost']:.4f}",
        )
    return t


def print_agents(view: dict[str, Any], console: Console) -> None:
    console.print(agents_table(view))
    console.print(pools_table(view))


def usage_line(run: dict[str, Any]) -> str | None:
    """One line for ``benchctl show``: the client VM time the run held, and its cost."""
    usage = run.get("usage")
    if not usage:
        return None
    line = f"client VM time: {_hours(usage['agent_s'])} over {usage['items']} client(s)"
    if usage.get("cost") is not None:
        line += f", cost {usage['cost']:.4f} at {usage['price_per_hour']} per VM-hour"
    return line
