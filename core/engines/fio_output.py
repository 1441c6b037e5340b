"""Pure parsers from fio's output to the service's typed results.

fio's ``--output-format=json+`` adds ``clat_ns.bins``: the completion-latency histogram as
{bucket value in ns: count}. Summing bins across jobs or clients and walking the cumulative
counts reproduces fio's own percentile method (``calc_clat_percentiles`` in fio's stat.c),
so merged percentiles are exact to fio's bucket resolution, unlike averaging p99s.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from core.models import Direction, DirectionResult, LatencyStats

DIRECTIONS: tuple[Direction, ...] = ("read", "write")
PERCENTILES = (
    1.0,
    5.0,
    10.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    70.0,
    80.0,
    90.0,
    95.0,
    99.0,
    99.5,
    99.9,
    99.95,
    99.99,
)
ALL_CLIENTS = "All clients"


def percentile_key(p: float) -> str:
    """fio's key spelling: 99.9 -> '99.900000'."""
    return f"{p:.6f}"


def percentile_from_bins(
    bins: Mapping[str, float] | Mapping[int, float] | Mapping[str, int] | Mapping[int, int],
    p: float,
) -> float:
    """The p-th percentile as fio computes it (stat.c ``calc_clat_percentiles``): the first
    bucket whose cumulative count reaches p% of all samples. Counts may be fractional (a
    log interval spread over two windows). Returns 0.0 for an empty histogram."""
    items = sorted((int(k), float(v)) for k, v in bins.items() if float(v) > 0)
    total = sum(v for _, v in items)
    if total <= 0:
        return 0.0
    threshold = p / 100.0 * total
    cumulative = 0.0
    for value, count in items:
        cumulative += count
        if cumulative >= threshold:
            return float(value)
    return float(items[-1][0])


def sum_bins(histograms: Iterable[Mapping[str, int]]) -> dict[str, int]:
    merged: dict[int, int] = defaultdict(int)
    for h in histograms:
        for k, v in h.items():
            merged[int(k)] += int(v)
    return {str(k): merged[k] for k in sorted(merged)}


def percentiles_from_bins(bins: Mapping[str, int]) -> dict[str, float]:
    return {percentile_key(p): percentile_from_bins(bins, p) for p in PERCENTILES}


def _merge_stats(parts: list[tuple[Mapping[str, Any], int]]) -> LatencyStats:
    """Pool (stats, sample count) pairs: weighted mean and pooled variance."""
    live = [(s, n) for s, n in parts if n > 0]
    if not live:
        return LatencyStats(min=0, max=0, mean=0, stddev=0)
    n_total = sum(n for _, n in live)
    mean = sum(float(s["mean"]) * n for s, n in live) / n_total
    second_moment = sum(n * (float(s["stddev"]) ** 2 + float(s["mean"]) ** 2) for s, n in live)
    var = max(second_moment / n_total - mean**2, 0.0)
    return LatencyStats(
        min=min(float(s["min"]) for s, _ in live),
        max=max(float(s["max"]) for s, _ in live),
        mean=mean,
        stddev=math.sqrt(var),
    )


def merge_direction(dirs: list[Mapping[str, Any]]) -> DirectionResult | None:
    """Merge one direction of several fio job entries (jobs of one client, or clients).

    IOPS and bandwidth are summed (jobs run concurrently); runtime is the longest.
    Completion latency always has percentiles; total latency has them when fio ran with
    ``lat_percentiles=1``; submission latency is kept as its statistics only.
    """
    live = [d for d in dirs if int(d.get("total_ios", 0)) > 0]
    if not live:
        return None
    counts = [int(d["total_ios"]) for d in live]
    clat_bins, clat_pcts = _histogram(live, "clat_ns")
    lat_bins, lat_pcts = _histogram(live, "lat_ns")
    return DirectionResult(
        io_bytes=sum(int(d["io_bytes"]) for d in live),
        total_ios=sum(counts),
        runtime_ms=max(int(d["runtime"]) for d in live),
        iops=sum(float(d["iops"]) for d in live),
        bw_bytes=sum(float(d["bw_bytes"]) for d in live),
        lat_ns=_merge_stats([(d["lat_ns"], n) for d, n in zip(live, counts, strict=True)]),
        slat_ns=_submission(live),
        clat_ns=_merge_stats([(d["clat_ns"], n) for d, n in zip(live, counts, strict=True)]),
        clat_percentiles_ns=clat_pcts,
        clat_bins_ns=clat_bins,
        lat_percentiles_ns=lat_pcts,
        lat_bins_ns=lat_bins,
    )


def _histogram(live: list[Mapping[str, Any]], kind: str) -> tuple[dict[str, int], dict[str, float]]:
    """(json+ bins summed, percentiles) of one latency kind: from the bins when every job
    has them, else the largest job's percentiles (an upper bound), else none."""
    entries = [d.get(kind) or {} for d in live]
    if all(e.get("bins") for e in entries):
        bins = sum_bins(e["bins"] for e in entries)
        return bins, percentiles_from_bins(bins)
    if all(e.get("percentile") for e in entries):
        return {}, _upper_bound_percentiles(entries)
    return {}, {}


def _submission(live: list[Mapping[str, Any]]) -> LatencyStats | None:
    """fio's slat statistics, weighted by their own sample counts (``N``); None where fio
    recorded no submission latency (synchronous engines)."""
    parts = [(d["slat_ns"], int(d["slat_ns"].get("N", 0))) for d in live if d.get("slat_ns")]
    if not any(n for _, n in parts):
        return None
    return _merge_stats(parts)


def _upper_bound_percentiles(entries: list[Mapping[str, Any]]) -> dict[str, float]:
    """Without json+ bins, jobs' percentiles cannot be merged: the largest job's value at
    each percentile is an upper bound of the merged one (callers mark it approximate)."""
    keys = {k for e in entries for k in e.get("percentile", {})}
    return {
        k: max(float(e.get("percentile", {}).get(k, 0.0)) for e in entries)
        for k in sorted(keys, key=float)
    }


def has_bins(entries: Iterable[Mapping[str, Any]]) -> bool:
    """Whether every direction that did I/O in these fio job entries carries json+ bins."""
    return all(
        bool(e[d]["clat_ns"].get("bins"))
        for e in entries
        for d in DIRECTIONS
        if d in e and int(e[d].get("total_ios", 0)) > 0
    )


def jobs_of(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The per-job entries of a fio JSON document, without fio's own 'All clients' sum."""
    if "client_stats" in doc:
        return [j for j in doc["client_stats"] if j.get("jobname") != ALL_CLIENTS]
    return list(doc.get("jobs", []))


def directions_from_fio(doc: Mapping[str, Any]) -> dict[Direction, DirectionResult]:
    jobs = jobs_of(doc)
    out: dict[Direction, DirectionResult] = {}
    for direction in DIRECTIONS:
        merged = merge_direction([j[direction] for j in jobs if direction in j])
        if merged is not None:
            out[direction] = merged
    return out


def fio_version(doc: Mapping[str, Any]) -> str:
    return str(doc.get("fio version", "unknown"))
