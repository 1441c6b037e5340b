"""The two views of a sweep (pure): latency against achieved IOPS, and aggregate
throughput against client count with linear scaling as the reference."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from core.models import DirectionAggregate, StepAggregate


def _kept(aggregates: Sequence[StepAggregate]) -> list[StepAggregate]:
    return sorted((a for a in aggregates if not a.discarded), key=lambda a: a.step)


CURVE_PERCENTILES = ("p50", "p99", "p99.9")


def latency_curve(aggregates: Sequence[StepAggregate]) -> list[dict[str, Any]]:
    """One point per step: achieved IOPS and, per direction, total latency's p50, p99,
    p99.9, maximum and mean (``<dir>_lat_<p>_ns``) and completion latency's p50 and p99
    (``<dir>_clat_<p>_ns``), in step order (a rate sweep: the unthrottled step, ``mode``
    rate-max, then 10% ... 100%). Results without total latency have only the latter."""
    points = []
    for a in _kept(aggregates):
        point: dict[str, Any] = {
            "step": a.step,
            "point": a.point,
            "mode": a.mode,
            "clients": a.clients,
            "iops": a.total_iops,
        }
        for d, entry in (("read", a.read), ("write", a.write)):
            if entry is not None:
                point |= _latency_columns(d, entry)
        points.append(point)
    return points


def _latency_columns(d: str, entry: DirectionAggregate) -> dict[str, float]:
    """``<dir>_lat_<p>_ns``, ``<dir>_lat_mean_ns`` and ``<dir>_clat_<p>_ns`` of a point."""
    out: dict[str, float] = {}
    if entry.lat_ns is not None:
        lat = entry.lat_ns.model_dump()  # by alias: p99.9
        out |= {
            f"{d}_lat_{p}_ns": lat[p] for p in (*CURVE_PERCENTILES, "max") if lat.get(p) is not None
        }
        out[f"{d}_lat_mean_ns"] = entry.lat_mean_ns
    out[f"{d}_clat_p50_ns"] = entry.clat_ns.p50
    out[f"{d}_clat_p99_ns"] = entry.clat_ns.p99
    return out


def scaleout_curve(aggregates: Sequence[StepAggregate]) -> list[dict[str, Any]]:
    """For each workload (``like_key``: same resolved workload, or the same point of a
    sweep), one point per client count (the mean of its kept steps), with linear scaling
    from that workload's smallest count as the reference line. Workloads are never mixed:
    an iodepth sweep's points are separate curves, labelled by the swept value."""
    by_workload: dict[str, dict[int, list[StepAggregate]]] = {}
    labels: dict[str, str] = {}
    for a in _kept(aggregates):
        key = a.like_key or a.point
        labels.setdefault(key, a.point)
        by_workload.setdefault(key, {}).setdefault(a.clients, []).append(a)
    out = []
    for key, by_clients in by_workload.items():
        base_n = min(by_clients)
        base = sum(a.total_iops for a in by_clients[base_n]) / len(by_clients[base_n])
        for n in sorted(by_clients):
            group = by_clients[n]
            iops = sum(a.total_iops for a in group) / len(group)
            bw = sum(sum(d.bw_bytes for d in a.directions()) for a in group)
            linear = base * n / base_n
            out.append(
                {
                    "point": labels[key],
                    "clients": n,
                    "iops": iops,
                    "bw_bytes": bw / len(group),
                    "linear_iops": linear,
                    "efficiency": iops / linear if linear else None,
                }
            )
    return out


def repetition_spread(aggregates: Sequence[StepAggregate]) -> list[dict[str, Any]]:
    """Spread of IOPS across the kept repetitions of each (clients, point)."""
    return spread_of_repetitions([(a.clients, a.point, a.total_iops) for a in _kept(aggregates)])


def spread_of_repetitions(steps: Iterable[tuple[int, str, float]]) -> list[dict[str, Any]]:
    """Spread of IOPS across repetitions: ``steps`` are (clients, point, IOPS) of the kept
    steps in step order (from stored aggregates, or from a run view's JSON)."""
    groups: dict[tuple[int, str], list[float]] = {}
    for clients, point, iops in steps:
        groups.setdefault((clients, point), []).append(iops)
    out = []
    for (clients, point), values in groups.items():
        if len(values) < 2:
            continue
        mean = sum(values) / len(values)
        sd = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
        out.append(
            {
                "clients": clients,
                "point": point,
                "repetitions": len(values),
                "mean_iops": mean,
                "min_iops": min(values),
                "max_iops": max(values),
                "cv": sd / mean if mean else 0.0,
            }
        )
    return out
