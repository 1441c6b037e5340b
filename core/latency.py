"""Latency as people read it: which kind a figure is, and a unit that fits it (pure).

fio measures three kinds (fio HOWTO, "Interpreting the output"): submission latency
(``slat``: to submit the I/O), completion latency (``clat``: from submission to its
completion) and total latency (``lat``: both, what the application waits for). The
published methods report the application's view, total latency: Vdbench's response time
and DiskSpd's latency are both timed from issuing an I/O to its completion
(docs/methodology.md, "Which latency"). So every view shows total latency unless it says
otherwise, and results without it (fio runs before it was recorded) show completion
latency, named as such.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

Kind = Literal["lat", "clat", "slat"]
KIND_NAMES: dict[Kind, str] = {"lat": "total", "clat": "completion", "slat": "submission"}
DEFAULT_KIND: Kind = "lat"


def format_ns(ns: float | None) -> str:
    """``2.49 µs``, ``659.5 µs``, ``3.129 ms``, ``1.2 s``: microseconds below a millisecond,
    four significant digits (fio's buckets are about 1.6 % wide), never ``0.000``."""
    if ns is None:
        return "-"
    if ns <= 0:
        return "0"
    for unit, scale in (("µs", 1e3), ("ms", 1e6)):
        # 999,999 ns is 1 ms to four digits, not 1000 µs.
        if float(f"{ns / scale:.4g}") < 1000:
            return f"{ns / scale:.4g} {unit}"
    v = ns / 1e9
    return f"{v:,.0f} s" if v >= 1000 else f"{v:.4g} s"


def shown(entry: Mapping[str, Any] | None) -> tuple[Kind, Mapping[str, Any]]:
    """The percentiles a view shows of one direction (an aggregate's, a result summary's, a
    curve point's): total latency's when it has them, else completion latency's."""
    if not entry:
        return DEFAULT_KIND, {}
    if entry.get("lat_ns"):
        return "lat", entry["lat_ns"]
    return "clat", entry.get("clat_ns") or {}


def table_kind(entries: Sequence[Mapping[str, Any] | None]) -> Kind:
    """One kind for a whole table: total when every row has it, else completion."""
    live = [e for e in entries if e]
    return "lat" if all(e.get("lat_ns") for e in live) else "clat"


def means_text(entry: Mapping[str, Any]) -> str:
    """``total 2.49 µs = submission 2.02 µs + completion 0.46 µs`` (fio's means)."""
    total, sub, comp = (entry.get(f"{k}_mean_ns") for k in ("lat", "slat", "clat"))
    if total is None:
        return ""
    if sub is None or comp is None:
        return f"total {format_ns(total)}" + (f", completion {format_ns(comp)}" if comp else "")
    return f"total {format_ns(total)} = submission {format_ns(sub)} + completion {format_ns(comp)}"
