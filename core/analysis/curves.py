"""The two views of a sweep (pure): latency against achieved IOPS, and aggregate
throughput against client count with linear scaling as the reference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.analysis.aggregate import total_iops


def _kept(aggregates: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted((a for a in aggregates if not a.get("discarded")), key=lambda a: a["step"])


CURVE_PERCENTILES = ("p50", "p99", "p99.9")


def latency_curve(aggregates: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One point per step: achieved IOPS and, per direction, total latency's p50, p99,
    p99.9, maximum and mean (``<dir>_lat_<p>_ns``) and completion latency's p50 and p99
    (``<dir>_clat_<p>_ns``), in step order (a rate sweep: the unthrottled step, ``mode``
    rate-max, then 10% ... 100%). Results without total latency have only the latter."""
    points = []
    for a in _kept(aggregates):
        point: dict[str, Any] = {
            "step": a["step"],
            "point": a.get("point"),
            "mode": a.get("mode"),
            "clients": a["clients"],
            "iops": total_iops(a),
        }
        for d in ("read", "write"):
            entry = a.get(d)
            if not entry:
                continue
            lat = entry.get("lat_ns") or {}
            for p in (*CURVE_PERCENTILES, "max"):
                if lat.get(p) is not None:
                    point[f"{d}_lat_{p}_ns"] = lat[p]
            if lat and entry.get("lat_mean_ns") is not None:
                point[f"{d}_lat_mean_ns"] = entry["lat_mean_ns"]
            for p in ("p50", "p99"):
                point[f"{d}_clat_{p}_ns"] = entry["clat_ns"][p]
        points.append(point)
    return points


def scaleout_curve(aggregates: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """For each workload (``like_key``: same resolved workload, or the same point of a
    sweep), one point per client count (the mean of its kept steps), with linear scaling
    from that workload's smallest count as the reference line. Workloads are never mixed:
    an iodepth sweep's points are separate curves, labelled by the swept value."""
    by_workload: dict[str, dict[int, list[Mapping[str, Any]]]] = {}
    labels: dict[str, str] = {}
    for a in _kept(aggregates):
        key = str(a.get("like_key") or a.get("point") or "")
        labels.setdefault(key, str(a.get("point") or ""))
        by_workload.setdefault(key, {}).setdefault(int(a["clients"]), []).append(a)
    out = []
    for key, by_clients in by_workload.items():
        base_n = min(by_clients)
        base = sum(total_iops(a) for a in by_clients[base_n]) / len(by_clients[base_n])
        for n in sorted(by_clients):
            group = by_clients[n]
            iops = sum(total_iops(a) for a in group) / len(group)
            bw = sum(sum(a[d]["bw_bytes"] for d in ("read", "write") if a.get(d)) for a in group)
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


def repetition_spread(aggregates: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Spread of IOPS across the kept repetitions of each (clients, point)."""
    groups: dict[tuple[int, str], list[float]] = {}
    for a in _kept(aggregates):
        groups.setdefault((int(a["clients"]), str(a.get("point") or "")), []).append(total_iops(a))
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
