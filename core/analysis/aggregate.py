"""Scale-out aggregation of many clients' results against one target (pure).

Rules, and why:
- The common window runs, in milliseconds, from the latest client start to the earliest
  client end. Only in that window were all N clients loading the target, so only there is
  the sum an N-client figure. Summing whole-run averages over different periods overstates
  it.
- Aggregate IOPS and bandwidth are the I/Os and bytes the clients completed inside the
  window divided by its length, counted by interval overlap on each client's timeline
  (core.timeline): never by nearest-second keys.
- Latency percentiles come from the clients' histogram rows inside the window, summed
  bucket by bucket and read the way fio reads its own (core.engines.fio_output): averaging p99s has
  no meaning. Where a client has no histogram rows, the clients' whole-run json+ bins are
  summed instead, and ``percentiles_basis`` says ``whole-run``; sources without bins give
  approximate percentiles (the largest client value) and say ``percentiles_exact: false``.
- A client whose measured start is more than ``max_start_skew_ms`` from the step's common
  instant did not run with the others: it is left out, named, and the step is partial.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.engines.fio_output import DIRECTIONS, percentile_from_bins, percentile_key, sum_bins
from core.models import Direction, DirectionResult
from core.timeline import (
    ClientSample,
    LatencyKind,
    Window,
    common_window,
    has_histograms,
    histogram_in,
    per_second,
    totals_in,
)

SUMMARY_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p99.9": 99.9, "p99.99": 99.99}
LITTLE_TOLERANCE = 0.20
RATE_CAP_TOLERANCE = 0.10  # a capped client below 90 % of its cap did not get its load
MAX_START_SKEW_MS = 1000


# Figures of a stored step aggregate (its "read" and "write" documents).
def total_iops(agg: Mapping[str, Any]) -> float:
    return float(sum(float(agg[d]["iops"]) for d in ("read", "write") if agg.get(d)))


def mean_latency_s(agg: Mapping[str, Any]) -> float:
    ios = sum(agg[d]["total_ios"] for d in ("read", "write") if agg.get(d))
    if not ios:
        return 0.0
    ns = sum(agg[d]["lat_mean_ns"] * agg[d]["total_ios"] for d in ("read", "write") if agg.get(d))
    return float(ns / ios / 1e9)


@dataclass(frozen=True)
class FailedClient:
    client: int
    agent_id: str | None
    error: str


def _summary(hist: Mapping[int, float] | Mapping[str, int]) -> dict[str, float]:
    """The summary percentiles and the maximum (the highest bucket: Vdbench's curves show
    the maximum response time apart, docs/methodology.md)."""
    out = {name: percentile_from_bins(hist, p) for name, p in SUMMARY_PERCENTILES.items()}
    return {**out, "max": percentile_from_bins(hist, 100.0)}


def _bins(r: DirectionResult, kind: LatencyKind) -> dict[str, int]:
    return r.lat_bins_ns if kind == "lat" else r.clat_bins_ns


def _percentiles(r: DirectionResult, kind: LatencyKind) -> dict[str, float]:
    return r.lat_percentiles_ns if kind == "lat" else r.clat_percentiles_ns


def _whole_run_percentiles(
    dirs: Sequence[DirectionResult], exact: bool, kind: LatencyKind = "clat"
) -> dict[str, float]:
    if exact:
        return _summary(sum_bins(_bins(d, kind) for d in dirs))
    # No histogram: the worst client's percentile is an upper bound, not the merged value.
    return {
        name: max(_percentiles(d, kind).get(percentile_key(p), 0.0) for d in dirs)
        for name, p in SUMMARY_PERCENTILES.items()
    }


def _window_histogram(
    samples: Sequence[ClientSample], d: Direction, w: Window, kind: LatencyKind = "clat"
) -> dict[int, float]:
    merged: dict[int, float] = {}
    for s in samples:
        assert s.timeline is not None
        for k, v in histogram_in(s.timeline, d, w, kind).items():
            merged[k] = merged.get(k, 0.0) + v
    return merged


def _total_latency(
    samples: Sequence[ClientSample], d: Direction, window: Window | None
) -> dict[str, Any]:
    """Total latency's percentiles (fio's ``lat``: submission + completion), the figure the
    published methods report (docs/methodology.md): from the window's total-latency rows,
    else the clients' whole-run json+ bins, else their percentiles (DiskSpd: an upper
    bound); nothing for results that have none (fio without ``lat_percentiles``)."""
    mine = [s for s in samples if d in s.dirs]
    if window is not None and all(
        s.timeline is not None and has_histograms(s.timeline, d, "lat") for s in mine
    ):
        return {
            "lat_ns": _summary(_window_histogram(mine, d, window, "lat")),
            "lat_percentiles_basis": "common-window",
            "lat_percentiles_exact": True,
        }
    dirs = [s.dirs[d] for s in mine]
    if all(r.lat_bins_ns for r in dirs):
        pcts, exact = _whole_run_percentiles(dirs, True, "lat"), True
    elif all(r.lat_percentiles_ns for r in dirs):
        pcts, exact = _whole_run_percentiles(dirs, False, "lat"), False
    else:
        return {}
    return {"lat_ns": pcts, "lat_percentiles_basis": "whole-run", "lat_percentiles_exact": exact}


def _means(dirs: Sequence[DirectionResult]) -> dict[str, float | None]:
    """The I/O-weighted means of each latency kind, in ns (fio's: total = submission +
    completion); submission is None where a client recorded none (synchronous engines)."""
    ios = sum(x.total_ios for x in dirs)

    def mean(values: list[float]) -> float:
        return sum(v * x.total_ios for v, x in zip(values, dirs, strict=True)) / ios if ios else 0.0

    slats = [x.slat_ns.mean for x in dirs if x.slat_ns is not None]
    return {
        "lat_mean_ns": mean([x.lat_ns.mean for x in dirs]),
        "clat_mean_ns": mean([x.clat_ns.mean for x in dirs]),
        "slat_mean_ns": mean(slats) if len(slats) == len(dirs) else None,
    }


def _skewed(
    samples: Sequence[ClientSample], bound_ms: float
) -> tuple[list[ClientSample], list[FailedClient]]:
    kept, dropped = [], []
    for s in samples:
        if s.start_skew_ms is not None and abs(s.start_skew_ms) > bound_ms:
            reason = (
                f"started {s.start_skew_ms:,.0f} ms from the step's common instant "
                f"(bound {bound_ms:,.0f} ms): not measured with the other clients"
            )
            dropped.append(FailedClient(s.client, s.agent_id, reason))
        else:
            kept.append(s)
    return kept, dropped


def aggregate(
    samples: Sequence[ClientSample],
    *,
    failed: Sequence[FailedClient] = (),
    expected_clients: int | None = None,
    single_client_iops: float | None = None,
    max_start_skew_ms: float = MAX_START_SKEW_MS,
) -> dict[str, Any]:
    """The aggregate of one step. ``single_client_iops`` (the 1-client step of the same
    workload) enables the scaling efficiency figure."""
    samples, late = _skewed(sorted(samples, key=lambda s: s.client), max_start_skew_ms)
    failed = [*failed, *late]
    expected = expected_clients if expected_clients is not None else len(samples) + len(failed)
    timelines = [s.timeline for s in samples if s.timeline is not None]
    window = common_window(timelines) if samples and len(timelines) == len(samples) else None
    out: dict[str, Any] = {
        "clients": len(samples),
        "clients_expected": expected,
        "partial": bool(failed) or len(samples) < expected,
        "failed_clients": [
            {"client": f.client, "agent_id": f.agent_id, "error": f.error} for f in failed
        ],
    }
    if window is not None:
        out["basis"] = "common-window"
        out["window"] = {
            "start_ms": window[0],
            "end_ms": window[1],
            "seconds": (window[1] - window[0]) / 1000,
        }
        out["series"] = {}
    else:
        out["basis"] = "whole-run"
        out["window"] = None
        out["note"] = "no per-second timeline common to all clients: whole-run figures are summed"

    total_iops = 0.0
    weighted_latency_s = 0.0
    for d in DIRECTIONS:
        dirs = [s.dirs[d] for s in samples if d in s.dirs]
        if not dirs:
            continue
        exact = all(s.has_bins and s.dirs[d].clat_bins_ns for s in samples if d in s.dirs)
        ios = sum(x.total_ios for x in dirs)
        means = _means(dirs)
        lat_mean = float(means["lat_mean_ns"] or 0.0)
        entry: dict[str, Any]
        if window is not None:
            seconds = (window[1] - window[0]) / 1000
            in_window = [totals_in(t, d, window) for t in timelines]
            window_ios = sum(i for i, _ in in_window)
            entry = {
                "iops": window_ios / seconds,
                "bw_bytes": sum(b for _, b in in_window) / seconds,
                "window_ios": window_ios,
            }
            out["series"][d] = per_second(timelines, d, window)
        else:
            entry = {"iops": sum(x.iops for x in dirs), "bw_bytes": sum(x.bw_bytes for x in dirs)}
        if window is not None and all(has_histograms(t, d) for t in timelines):
            entry["clat_ns"] = _summary(_window_histogram(samples, d, window))
            entry["percentiles_basis"] = "common-window"
            exact = True
        else:
            entry["clat_ns"] = _whole_run_percentiles(dirs, exact)
            entry["percentiles_basis"] = "whole-run"
        entry.update(total_ios=ios, percentiles_exact=exact, **means)
        entry.update(_total_latency(samples, d, window))
        out[d] = entry
        total_iops += entry["iops"]
        weighted_latency_s += entry["iops"] * lat_mean / 1e9

    out["per_client"] = _per_client(samples, window, total_iops)
    out["spread"] = _spread([c["iops"] for c in out["per_client"]])
    out["scaling_efficiency"] = (
        total_iops / (len(samples) * single_client_iops)
        if single_client_iops and samples and len(samples) > 1
        else None
    )
    out["littles_law"] = _littles_law(samples, total_iops, weighted_latency_s)
    skews = [s.start_skew_ms for s in samples if s.start_skew_ms is not None]
    out["start_skew_ms"] = {"max": max(skews), "min": min(skews)} if skews else None
    return out


def _client_latency(
    s: ClientSample, d: Direction, window: Window | None, kind: LatencyKind = "clat"
) -> dict[str, float] | None:
    if window is not None and s.timeline is not None and has_histograms(s.timeline, d, kind):
        hist = histogram_in(s.timeline, d, window, kind)
        return {"p50": percentile_from_bins(hist, 50.0), "p99": percentile_from_bins(hist, 99.0)}
    r = s.dirs[d]
    if _bins(r, kind):
        bins = _bins(r, kind)
        return {"p50": percentile_from_bins(bins, 50.0), "p99": percentile_from_bins(bins, 99.0)}
    pcts = _percentiles(r, kind)
    if not pcts and kind == "lat":
        return None
    return {
        "p50": pcts.get(percentile_key(50.0), 0.0),
        "p99": pcts.get(percentile_key(99.0), 0.0),
    }


def _per_client(
    samples: Sequence[ClientSample], window: Window | None, total_iops: float
) -> list[dict[str, Any]]:
    rows = []
    for s in samples:
        iops = bw = 0.0
        for d, r in s.dirs.items():
            if window is not None and s.timeline is not None:
                ios, nbytes = totals_in(s.timeline, d, window)
                seconds = (window[1] - window[0]) / 1000
                iops += ios / seconds
                bw += nbytes / seconds
            else:
                iops += r.iops
                bw += r.bw_bytes
        rows.append(
            {
                "client": s.client,
                "agent_id": s.agent_id,
                "iops": iops,
                "bw_bytes": bw,
                "lat_ns": {
                    d: lat
                    for d in s.dirs
                    if (lat := _client_latency(s, d, window, "lat")) is not None
                },
                "clat_ns": {d: _client_latency(s, d, window) for d in s.dirs},
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


def _littles_law(
    samples: Sequence[ClientSample], total_iops: float, implied: float
) -> dict[str, Any] | None:
    """Little's law: I/Os in flight = throughput x time in system. When the measured
    IOPS x mean latency is far from what the clients kept outstanding, the clients were not
    the bottleneck they were configured to be (CPU, network, throttling) or a figure is off.

    A rate-capped client keeps fewer I/Os in flight than it could, by design: there the
    check is whether the clients got the load they were capped at."""
    if not samples:
        return None
    caps = [s.rate_cap_iops for s in samples]
    if any(c is not None for c in caps):
        cap = float(sum(c for c in caps if c is not None))
        ratio = total_iops / cap if cap else 0.0
        return {
            "mode": "rate-cap",
            "cap_iops": cap,
            "achieved_iops": total_iops,
            "ratio": ratio,
            "flagged": ratio < 1.0 - RATE_CAP_TOLERANCE,
        }
    outstanding = [s.outstanding_ios for s in samples]
    if any(o is None for o in outstanding):
        return None
    configured = float(sum(o for o in outstanding if o is not None))
    ratio = implied / configured if configured else 0.0
    return {
        "mode": "outstanding",
        "outstanding_ios": configured,
        "implied_ios": implied,
        "ratio": ratio,
        "flagged": abs(ratio - 1.0) > LITTLE_TOLERANCE,
    }
