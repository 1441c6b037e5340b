"""The series' metrics by name, and how each reads (pure, no numpy): apart from the
detector so that what only names or prints a metric (the gate's table, benchctl's start)
does not import numpy, about 0.3 s of every benchctl command."""

from __future__ import annotations

from core.latency import KIND_NAMES, format_ns
from core.models.series import SERIES_PERCENTILES, metric_name

MIB = 1 << 20

# metric -> True when higher is better. Latency metrics name their kind (core.latency):
# ``read.lat.p99`` total latency, ``read.clat.p99`` completion latency.
METRICS: dict[str, bool] = {
    f"{d}.{m}": m in ("iops", "bw_bytes")
    for d in ("read", "write")
    for m in (
        "iops",
        "bw_bytes",
        *(f"lat.{p}" for p in SERIES_PERCENTILES),
        *(f"clat.{p}" for p in SERIES_PERCENTILES),
    )
}


def metric_text(metric: str) -> str:
    """``read total p99 latency`` for ``read.lat.p99``; ``read IOPS`` for ``read.iops``."""
    parts = metric_name(metric).split(".", 2)
    kinds = {"lat": KIND_NAMES["lat"], "clat": KIND_NAMES["clat"]}
    if len(parts) == 3 and parts[1] in kinds:
        return f"{parts[0]} {kinds[parts[1]]} {parts[2]} latency"
    names = {"iops": "IOPS", "bw_bytes": "MiB/s", "mean": "mean latency"}
    if len(parts) == 2:
        return f"{parts[0]} {names.get(parts[1], parts[1])}"
    return metric


def metric_value(value: float | None, metric: str) -> str:
    """A metric's value in its unit: latency in µs or ms, MiB/s, IOPS with separators."""
    if value is None:
        return "-"
    name = metric_name(metric)
    if name.endswith(("p50", "p99", "p99.9", "mean", "max")):
        return format_ns(value)
    if name.endswith("bw_bytes"):
        return f"{value / MIB:,.1f} MiB/s"
    return f"{value:,.0f}"
