"""Scale-out aggregation of many clients' results against one target (pure).

Rules, and why:
- The common window runs from the latest client start to the earliest client end. Only in
  that window were all N clients loading the target, so only there is the sum an N-client
  figure. Summing whole-run averages over different periods overstates it.
- Aggregate IOPS and bandwidth are the mean over the window of the per-second sums of the
  clients' series.
- Latency percentiles come from the clients' fio histograms summed bucket by bucket and
  read the way fio reads its own (see core.fioparse); averaging p99s has no meaning. The
  histograms cover each client's whole measured period (fio keeps no per-second bins).
  Sources without bins give approximate percentiles (the largest client value), and say so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.fioparse import DIRECTIONS, percentile_from_bins, percentile_key, sum_bins
from core.models import Direction, DirectionResult, SeriesPoint

SUMMARY_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p99.9": 99.9, "p99.99": 99.99}
LITTLE_TOLERANCE = 0.20


@dataclass(frozen=True)
class ClientSample:
    """One client's measured figures, from a stored Result or an offline fio output."""

    client: int
    dirs: Mapping[Direction, DirectionResult]
    series: Mapping[Direction, Sequence[SeriesPoint]] = field(default_factory=dict)
    agent_id: str | None = None
    outstanding_ios: int | None = None  # threads x queue depth this client kept in flight
    start_skew_ms: float | None = None
    has_bins: bool = True


@dataclass(frozen=True)
class FailedClient:
    client: int
    agent_id: str | None
    error: str


def _percentiles(dirs: Sequence[DirectionResult], exact: bool) -> dict[str, float]:
    if exact:
        bins = sum_bins(d.clat_bins_ns for d in dirs)
        return {name: percentile_from_bins(bins, p) for name, p in SUMMARY_PERCENTILES.items()}
    # No histogram: the worst client's percentile is an upper bound, not the merged value.
    return {
        name: max(d.clat_percentiles_ns.get(percentile_key(p), 0.0) for d in dirs)
        for name, p in SUMMARY_PERCENTILES.items()
    }


def common_window(samples: Sequence[ClientSample]) -> tuple[int, int] | None:
    """(first, last) Unix second that every client's series covers, or None."""
    firsts, lasts = [], []
    for s in samples:
        stamps = [p.t for points in s.series.values() for p in points]
        if not stamps:
            return None
        firsts.append(min(stamps))
        lasts.append(max(stamps))
    if not firsts:
        return None
    start, end = max(firsts), min(lasts)
    return (start, end) if start <= end else None


def _window_sums(
    samples: Sequence[ClientSample], window: tuple[int, int]
) -> tuple[
    dict[Direction, list[dict[str, float]]], dict[int, dict[Direction, tuple[float, float]]]
]:
    """Per-second aggregate series and each client's mean (iops, bw) inside the window.
    A second a client did not log counts as zero for it: it did no measured I/O then."""
    seconds = list(range(window[0], window[1] + 1))
    totals: dict[Direction, list[dict[str, float]]] = {}
    per_client: dict[int, dict[Direction, tuple[float, float]]] = {s.client: {} for s in samples}
    for d in DIRECTIONS:
        if not any(d in s.series for s in samples):
            continue
        rows = {t: {"t": float(t), "iops": 0.0, "bw_bytes": 0.0} for t in seconds}
        for s in samples:
            by_t = {p.t: p for p in s.series.get(d, [])}
            iops = [by_t[t].iops if t in by_t else 0.0 for t in seconds]
            bw = [by_t[t].bw_bytes if t in by_t else 0.0 for t in seconds]
            for t, i, b in zip(seconds, iops, bw, strict=True):
                rows[t]["iops"] += i
                rows[t]["bw_bytes"] += b
            per_client[s.client][d] = (sum(iops) / len(seconds), sum(bw) / len(seconds))
        totals[d] = [rows[t] for t in seconds]
    return totals, per_client


def aggregate(
    samples: Sequence[ClientSample],
    *,
    failed: Sequence[FailedClient] = (),
    expected_clients: int | None = None,
    single_client_iops: float | None = None,
) -> dict[str, Any]:
    """The aggregate of one step. ``single_client_iops`` (the 1-client step of the same run)
    enables the scaling efficiency figure."""
    samples = sorted(samples, key=lambda s: s.client)
    expected = expected_clients if expected_clients is not None else len(samples) + len(failed)
    window = common_window(samples)
    out: dict[str, Any] = {
        "clients": len(samples),
        "clients_expected": expected,
        "partial": bool(failed) or len(samples) < expected,
        "failed_clients": [
            {"client": f.client, "agent_id": f.agent_id, "error": f.error} for f in failed
        ],
    }
    client_means: dict[int, dict[Direction, tuple[float, float]]] = {}
    if window is not None:
        series, client_means = _window_sums(samples, window)
        out["basis"] = "common-window"
        out["window"] = {
            "start_ms": (window[0] - 1) * 1000,
            "end_ms": window[1] * 1000,
            "seconds": window[1] - window[0] + 1,
        }
        out["series"] = series
    else:
        out["basis"] = "whole-run"
        out["window"] = None
        out["note"] = "no per-second series common to all clients: whole-run figures are summed"

    total_iops = 0.0
    weighted_latency_s = 0.0
    for d in DIRECTIONS:
        dirs = [s.dirs[d] for s in samples if d in s.dirs]
        if not dirs:
            continue
        exact = all(s.has_bins and s.dirs[d].clat_bins_ns for s in samples if d in s.dirs)
        if window is not None and d in out["series"]:
            rows = out["series"][d]
            iops = sum(r["iops"] for r in rows) / len(rows)
            bw = sum(r["bw_bytes"] for r in rows) / len(rows)
        else:
            iops = sum(x.iops for x in dirs)
            bw = sum(x.bw_bytes for x in dirs)
        ios = sum(x.total_ios for x in dirs)
        lat_mean = sum(x.lat_ns.mean * x.total_ios for x in dirs) / ios if ios else 0.0
        out[d] = {
            "iops": iops,
            "bw_bytes": bw,
            "total_ios": ios,
            "lat_mean_ns": lat_mean,
            "clat_ns": _percentiles(dirs, exact),
            "percentiles_exact": exact,
        }
        total_iops += iops
        weighted_latency_s += iops * lat_mean / 1e9

    out["per_client"] = _per_client(samples, client_means, total_iops)
    out["spread"] = _spread([c["iops"] for c in out["per_client"]])
    out["scaling_efficiency"] = (
        total_iops / (len(samples) * single_client_iops) if single_client_iops and samples else None
    )
    out["littles_law"] = _littles_law(samples, weighted_latency_s)
    skews = [s.start_skew_ms for s in samples if s.start_skew_ms is not None]
    out["start_skew_ms"] = {"max": max(skews), "min": min(skews)} if skews else None
    return out


def _per_client(
    samples: Sequence[ClientSample],
    means: Mapping[int, Mapping[Direction, tuple[float, float]]],
    total_iops: float,
) -> list[dict[str, Any]]:
    rows = []
    for s in samples:
        iops = bw = 0.0
        lat: dict[str, dict[str, float]] = {}
        for d, r in s.dirs.items():
            mean = means.get(s.client, {}).get(d)
            iops += mean[0] if mean else r.iops
            bw += mean[1] if mean else r.bw_bytes
            bins = r.clat_bins_ns
            lat[d] = (
                {"p50": percentile_from_bins(bins, 50.0), "p99": percentile_from_bins(bins, 99.0)}
                if bins
                else {
                    "p50": r.clat_percentiles_ns.get(percentile_key(50.0), 0.0),
                    "p99": r.clat_percentiles_ns.get(percentile_key(99.0), 0.0),
                }
            )
        rows.append(
            {
                "client": s.client,
                "agent_id": s.agent_id,
                "iops": iops,
                "bw_bytes": bw,
                "clat_ns": lat,
                "share": iops / total_iops if total_iops else 0.0,
                "start_skew_ms": s.start_skew_ms,
            }
        )
    return rows


def _spread(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return {"min": min(values), "max": max(values), "cv": sd / mean if mean else 0.0}


def _littles_law(samples: Sequence[ClientSample], implied: float) -> dict[str, Any] | None:
    """Little's law: I/Os in flight = throughput x time in system. When the measured
    IOPS x mean latency is far from what the clients kept outstanding, the clients were not
    the bottleneck they were configured to be (CPU, network, throttling) or a figure is off."""
    outstanding = [s.outstanding_ios for s in samples]
    if not samples or any(o is None for o in outstanding):
        return None
    configured = float(sum(o for o in outstanding if o is not None))
    ratio = implied / configured if configured else 0.0
    return {
        "outstanding_ios": configured,
        "implied_ios": implied,
        "ratio": ratio,
        "flagged": abs(ratio - 1.0) > LITTLE_TOLERANCE,
    }
