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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from core.analysis.step_checks import littles_law, scaling_efficiency, skew_range, spread
from core.engines.fio_output import DIRECTIONS, percentile_from_bins, percentile_key, sum_bins
from core.models import (
    AggregateWindow,
    ClientFigures,
    ClientLatency,
    Direction,
    DirectionAggregate,
    DirectionResult,
    FailedClientRow,
    PercentileSummary,
    StepFigures,
)
from core.models.aggregate import Basis
from core.timeline import (
    ClientSample,
    ClientTimeline,
    LatencyKind,
    Window,
    common_window,
    has_histograms,
    histogram_in,
    per_second,
    totals_in,
)

SUMMARY_PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p99.9": 99.9, "p99.99": 99.99}
MAX_START_SKEW_MS = 1000
WHOLE_RUN_NOTE = "no per-second timeline common to all clients: whole-run figures are summed"


@dataclass(frozen=True)
class FailedClient:
    client: int
    agent_id: str | None
    error: str


def _summary(hist: Mapping[int, float] | Mapping[str, int]) -> PercentileSummary:
    """The summary percentiles and the maximum (the highest bucket: Vdbench's curves show
    the maximum response time apart, docs/methodology.md)."""
    out = {name: percentile_from_bins(hist, p) for name, p in SUMMARY_PERCENTILES.items()}
    return PercentileSummary.model_validate({**out, "max": percentile_from_bins(hist, 100.0)})


def _bins(r: DirectionResult, kind: LatencyKind) -> dict[str, int]:
    return r.lat_bins_ns if kind == "lat" else r.clat_bins_ns


def _percentiles(r: DirectionResult, kind: LatencyKind) -> dict[str, float]:
    return r.lat_percentiles_ns if kind == "lat" else r.clat_percentiles_ns


def _whole_run_percentiles(
    dirs: Sequence[DirectionResult], exact: bool, kind: LatencyKind = "clat"
) -> PercentileSummary:
    if exact:
        return _summary(sum_bins(_bins(d, kind) for d in dirs))
    # No histogram: the worst client's percentile is an upper bound, not the merged value.
    return PercentileSummary.model_validate(
        {
            name: max(_percentiles(d, kind).get(percentile_key(p), 0.0) for d in dirs)
            for name, p in SUMMARY_PERCENTILES.items()
        }
    )


def _window_histogram(
    samples: Sequence[ClientSample], d: Direction, w: Window, kind: LatencyKind = "clat"
) -> dict[int, float]:
    merged: dict[int, float] = {}
    for s in samples:
        assert s.timeline is not None
        for k, v in histogram_in(s.timeline, d, w, kind).items():
            merged[k] = merged.get(k, 0.0) + v
    return merged


# Percentiles, where they were read from, and whether they are exact (not an upper bound).
Percentiles = tuple[PercentileSummary, Basis, bool]


def _total_latency(
    samples: Sequence[ClientSample], d: Direction, window: Window | None
) -> Percentiles | None:
    """Total latency's percentiles (fio's ``lat``: submission + completion), the figure the
    published methods report (docs/methodology.md): from the window's total-latency rows,
    else the clients' whole-run json+ bins, else their percentiles (DiskSpd: an upper
    bound); nothing for results that have none (fio without ``lat_percentiles``)."""
    mine = [s for s in samples if d in s.dirs]
    if window is not None and all(
        s.timeline is not None and has_histograms(s.timeline, d, "lat") for s in mine
    ):
        return _summary(_window_histogram(mine, d, window, "lat")), "common-window", True
    dirs = [s.dirs[d] for s in mine]
    if all(r.lat_bins_ns for r in dirs):
        return _whole_run_percentiles(dirs, True, "lat"), "whole-run", True
    if all(r.lat_percentiles_ns for r in dirs):
        return _whole_run_percentiles(dirs, False, "lat"), "whole-run", False
    return None


def _completion_latency(
    samples: Sequence[ClientSample], d: Direction, window: Window | None
) -> Percentiles:
    """Completion latency's percentiles: from the window's histogram rows where every
    client has them, else the clients' whole-run bins (exact only where all have bins)."""
    timelines = [s.timeline for s in samples if s.timeline is not None]
    if window is not None and all(has_histograms(t, d) for t in timelines):
        return _summary(_window_histogram(samples, d, window)), "common-window", True
    mine = [s for s in samples if d in s.dirs]
    exact = all(s.has_bins and s.dirs[d].clat_bins_ns for s in mine)
    return _whole_run_percentiles([s.dirs[d] for s in mine], exact), "whole-run", exact


def _means(dirs: Sequence[DirectionResult]) -> tuple[float, float, float | None]:
    """The I/O-weighted means of each latency kind, in ns (fio's: total = submission +
    completion); submission is None where a client recorded none (synchronous engines)."""
    ios = sum(x.total_ios for x in dirs)

    def mean(values: list[float]) -> float:
        return sum(v * x.total_ios for v, x in zip(values, dirs, strict=True)) / ios if ios else 0.0

    slats = [x.slat_ns.mean for x in dirs if x.slat_ns is not None]
    return (
        mean([x.lat_ns.mean for x in dirs]),
        mean([x.clat_ns.mean for x in dirs]),
        mean(slats) if len(slats) == len(dirs) else None,
    )


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


def _direction(
    samples: Sequence[ClientSample], d: Direction, window: Window | None
) -> DirectionAggregate:
    """One direction of the step: its throughput counted inside the common window (else
    the clients' whole-run figures summed), its latency percentiles and means."""
    dirs = [s.dirs[d] for s in samples if d in s.dirs]
    window_ios: float | None = None
    if window is not None:
        seconds = (window[1] - window[0]) / 1000
        timelines = [s.timeline for s in samples if s.timeline is not None]
        in_window = [totals_in(t, d, window) for t in timelines]
        window_ios = sum(i for i, _ in in_window)
        iops, bw = window_ios / seconds, sum(b for _, b in in_window) / seconds
    else:
        iops, bw = sum(x.iops for x in dirs), sum(x.bw_bytes for x in dirs)
    clat, basis, exact = _completion_latency(samples, d, window)
    lat_mean, clat_mean, slat_mean = _means(dirs)
    total = _total_latency(samples, d, window)
    return DirectionAggregate(
        iops=iops,
        bw_bytes=bw,
        window_ios=window_ios,
        clat_ns=clat,
        percentiles_basis=basis,
        total_ios=sum(x.total_ios for x in dirs),
        percentiles_exact=exact,
        lat_mean_ns=lat_mean,
        clat_mean_ns=clat_mean,
        slat_mean_ns=slat_mean,
        lat_ns=total[0] if total else None,
        lat_percentiles_basis=total[1] if total else None,
        lat_percentiles_exact=total[2] if total else None,
    )


def aggregate(
    samples: Sequence[ClientSample],
    *,
    failed: Sequence[FailedClient] = (),
    expected_clients: int | None = None,
    single_client_iops: float | None = None,
    max_start_skew_ms: float = MAX_START_SKEW_MS,
) -> StepFigures:
    """The aggregate of one step. ``single_client_iops`` (the 1-client step of the same
    workload) enables the scaling efficiency figure."""
    samples, late = _skewed(sorted(samples, key=lambda s: s.client), max_start_skew_ms)
    failed = [*failed, *late]
    expected = expected_clients if expected_clients is not None else len(samples) + len(failed)
    timelines = [s.timeline for s in samples if s.timeline is not None]
    window = common_window(timelines) if samples and len(timelines) == len(samples) else None
    dirs = {d: _direction(samples, d, window) for d in DIRECTIONS if _ran(samples, d)}
    total_iops, weighted_latency_s = _load(dirs.values())
    per_client = _per_client(samples, window, total_iops)
    return StepFigures(
        clients=len(samples),
        clients_expected=expected,
        partial=bool(failed) or len(samples) < expected,
        failed_clients=[
            FailedClientRow(client=f.client, agent_id=f.agent_id, error=f.error) for f in failed
        ],
        basis="common-window" if window is not None else "whole-run",
        window=_window(window),
        series=_series(timelines, list(dirs), window),
        note=None if window is not None else WHOLE_RUN_NOTE,
        read=dirs.get("read"),
        write=dirs.get("write"),
        per_client=per_client,
        spread=spread([c.iops for c in per_client]),
        scaling_efficiency=scaling_efficiency(total_iops, len(samples), single_client_iops),
        littles_law=littles_law(samples, total_iops, weighted_latency_s),
        start_skew_ms=skew_range(samples),
    )


def _ran(samples: Sequence[ClientSample], d: Direction) -> bool:
    return any(d in s.dirs for s in samples)


def _load(dirs: Iterable[DirectionAggregate]) -> tuple[float, float]:
    """The step's IOPS, and the I/Os its latency implies in flight (IOPS x mean latency)."""
    total_iops = 0.0
    weighted_latency_s = 0.0
    for entry in dirs:
        total_iops += entry.iops
        weighted_latency_s += entry.iops * entry.lat_mean_ns / 1e9
    return total_iops, weighted_latency_s


def _series(
    timelines: Sequence[ClientTimeline], ran: Sequence[Direction], window: Window | None
) -> dict[Direction, list[dict[str, float]]] | None:
    """The clients' summed IOPS and bytes in each second of the common window."""
    if window is None:
        return None
    return {d: per_second(timelines, d, window) for d in ran}


def _window(window: Window | None) -> AggregateWindow | None:
    if window is None:
        return None
    seconds = (window[1] - window[0]) / 1000
    return AggregateWindow(start_ms=window[0], end_ms=window[1], seconds=seconds)


def _client_latency(
    s: ClientSample, d: Direction, window: Window | None, kind: LatencyKind = "clat"
) -> ClientLatency | None:
    if window is not None and s.timeline is not None and has_histograms(s.timeline, d, kind):
        hist = histogram_in(s.timeline, d, window, kind)
        return ClientLatency(
            p50=percentile_from_bins(hist, 50.0), p99=percentile_from_bins(hist, 99.0)
        )
    r = s.dirs[d]
    if _bins(r, kind):
        bins = _bins(r, kind)
        return ClientLatency(
            p50=percentile_from_bins(bins, 50.0), p99=percentile_from_bins(bins, 99.0)
        )
    pcts = _percentiles(r, kind)
    if not pcts and kind == "lat":
        return None
    return ClientLatency(
        p50=pcts.get(percentile_key(50.0), 0.0), p99=pcts.get(percentile_key(99.0), 0.0)
    )


def _client_throughput(s: ClientSample, window: Window | None) -> tuple[float, float]:
    """A client's IOPS and bytes per second, inside the window where it has a timeline."""
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
    return iops, bw


def _per_client(
    samples: Sequence[ClientSample], window: Window | None, total_iops: float
) -> list[ClientFigures]:
    rows = []
    for s in samples:
        iops, bw = _client_throughput(s, window)
        lat = {d: _client_latency(s, d, window, "lat") for d in s.dirs}
        clat = {d: _client_latency(s, d, window) for d in s.dirs}
        rows.append(
            ClientFigures(
                client=s.client,
                agent_id=s.agent_id,
                iops=iops,
                bw_bytes=bw,
                lat_ns={d: v for d, v in lat.items() if v is not None},
                clat_ns={d: v for d, v in clat.items() if v is not None},
                share=iops / total_iops if total_iops else 0.0,
                start_skew_ms=s.start_skew_ms,
            )
        )
    return rows
