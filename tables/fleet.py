"""``benchctl agents``: the agent registry and the pools as tables; a run's client VM time."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.table import Table


def _ago(ms: int | None, now_ms: int) -> str:
    return "" if ms is None else f"{max(0, now_ms - ms) / 1000:.0f} s ago"


def vm_time(seconds: float) -> str:
    """Client VM time in one form whatever its size, hours:minutes:seconds (a cost is per
    VM-hour; a run of seconds reads as such: 0:00:12.4, a day's use 24:00:00.0)."""
    tenths = round(seconds * 10)
    whole, tenth = divmod(tenths, 10)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}.{tenth}"


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
            vm_time(a["used_s"]),
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
            vm_time(p["used_s"]),
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
    line = f"client VM time: {vm_time(usage['agent_s'])} over {usage['items']} client(s)"
    if usage.get("cost") is not None:
        line += f", cost {usage['cost']:.4f} at {usage['price_per_hour']} per VM-hour"
    return line
