"""Series of comparable results, their infrastructure segments, and regression detection
(pure).

A series is every aggregate of the same benchmark: engine, mounts, client count and the
resolved workload. A rate cap on a plain run is a load condition (the same benchmark held
to a lower rate, as a throttled volume would be), so it is not part of the key; rate-curve
steps are keyed by their percentage instead. Within a series, infrastructure facts (VM size,
region, filesystem type, mount source and options such as nconnect or SMB multichannel)
cut segments: a change of facts starts a new segment and is never reported as a
regression, because detection only compares points inside one segment.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from core.analysis.changepoint import ChangePoint, at_splits, detect
from core.analysis.magnitude import DEFAULT_MIN_MAGNITUDE_PCT
from core.analysis.metrics import METRICS, metric_text, metric_value
from core.models.regression import Change, MeanStd
from core.models.result import HostFacts, MountFacts
from core.models.series import SERIES_PERCENTILES, InfraFacts, StepPoint, metric_name
from core.models.target_facts import RunTargetFacts

__all__ = ["METRICS", "SERIES_PERCENTILES", "metric_name", "metric_text", "metric_value"]


MIN_POINTS = 10  # E-divisive needs min_size points on each side of a change


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def series_key(
    *,
    engine: str,
    targets: Sequence[str],
    clients: int,
    workload: Mapping[str, Any],
    mode: str | None,
    point: str | None,
) -> str:
    w = dict(workload)
    if mode in (None, "measure"):
        w.pop("rate_iops", None)
    label = point if mode == "rate" else None
    return _digest(
        {
            "engine": engine,
            "targets": list(targets),
            "clients": clients,
            "workload": w,
            "point": label,
        }
    )


class Placed(Protocol):
    """What the infrastructure facts read of a result (core.models.Result): where it ran."""

    @property
    def host(self) -> HostFacts: ...
    @property
    def mounts(self) -> Sequence[MountFacts]: ...


def infra_facts(
    results: Sequence[Placed], target_facts: RunTargetFacts | None = None
) -> InfraFacts:
    """The facts that make two runs' infrastructure the same, across all clients, and the
    target facts a client cannot see but that change what is measured (a share's SMB
    metadata caching), as the run recorded them (``Run.target_facts``)."""
    hosts = sorted({(r.host.vm_size, r.host.region) for r in results}, key=str)
    mounts = sorted(
        {
            (m.alias, m.fstype, m.source, _stable_options(m.options))
            for r in results
            for m in r.mounts
        }
    )
    switches = target_switches(target_facts)
    # Only when declared, so earlier points keep their fingerprint.
    return InfraFacts.model_validate(
        {"hosts": hosts, "mounts": mounts, "targets": switches or None}
    )


TARGET_SWITCHES = ("metadata_caching",)


def target_switches(target_facts: RunTargetFacts | None) -> list[list[Any]]:
    """[alias, fact, value] for each declared switch of the run's targets."""
    out = []
    for entry in target_facts.targets if target_facts is not None else []:
        for name in TARGET_SWITCHES:
            if (value := entry.fact(name)) is not None:
                out.append([entry.alias, name, value])
    return sorted(out, key=str)


def _stable_options(options: str) -> str:
    # Access-time flags and the like change nothing about throughput; keep what does.
    ignore = {"rw", "relatime", "noatime", "nodiratime", "strictatime"}
    return ",".join(sorted(o for o in options.split(",") if o and o not in ignore))


def infra_fingerprint(facts: InfraFacts) -> str:
    return _digest(facts.model_dump(mode="json"))


def metrics_of(aggregate: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for d in ("read", "write"):
        a = aggregate.get(d)
        if not a:
            continue
        out[f"{d}.iops"] = float(a["iops"])
        out[f"{d}.bw_bytes"] = float(a["bw_bytes"])
        for kind in ("lat", "clat"):
            pcts = a.get(f"{kind}_ns") or {}
            for p in SERIES_PERCENTILES:
                if pcts.get(p) is not None:
                    out[f"{d}.{kind}.{p}"] = float(pcts[p])
    return out


def segments(points: Sequence[StepPoint]) -> list[list[StepPoint]]:
    """Consecutive runs (in time order) with the same infrastructure fingerprint."""
    out: list[list[StepPoint]] = []
    for p in sorted(points, key=lambda p: (p.time_ms, p.id)):
        if out and out[-1][-1].infra == p.infra:
            out[-1].append(p)
        else:
            out.append([p])
    return out


def find_changes(
    points: Sequence[StepPoint],
    *,
    pvalue: float = 0.001,
    min_magnitude_pct: float = DEFAULT_MIN_MAGNITUDE_PCT,
) -> list[Change]:
    """Change points of every metric within the latest infrastructure segment, with the
    evidence a person needs: before/after, change, p-value, first run after, runs around.
    Changes smaller than ``min_magnitude_pct`` percent are not reported. Bandwidth has the
    change points of IOPS (with its own figures): one block size makes it IOPS times a
    constant, so the two cannot disagree (core.analysis.gate, rule 6)."""
    segs = segments([p.named() for p in points])
    if not segs:
        return []
    latest = segs[-1]
    out = []
    splits: dict[str, list[int]] = {}
    for metric, higher_is_better in METRICS.items():
        rows = [p for p in latest if metric in p.metrics]
        if len(rows) < MIN_POINTS:
            continue
        values = [p.metrics[metric] for p in rows]
        direction, name = metric.split(".", 1)
        leader = f"{direction}.iops"
        if name == "bw_bytes" and leader in splits and all(leader in p.metrics for p in rows):
            found = at_splits(values, splits[leader])
        else:
            found = detect(values, pvalue=pvalue, min_magnitude_pct=min_magnitude_pct)
            splits[metric] = [cp.index for cp in found]
        for cp in found:
            out.append(_evidence(metric, higher_is_better, cp, rows))
    return out


def _evidence(
    metric: str, higher_is_better: bool, cp: ChangePoint, rows: Sequence[StepPoint]
) -> Change:
    worse = cp.after_mean < cp.before_mean if higher_is_better else cp.after_mean > cp.before_mean
    first = rows[cp.index]
    return Change(
        metric=metric,
        kind="regression" if worse else "improvement",
        before=MeanStd(mean=cp.before_mean, std=cp.before_std),
        after=MeanStd(mean=cp.after_mean, std=cp.after_std),
        change_pct=cp.change_pct,
        pvalue=cp.pvalue,
        method="e-divisive",
        first_run_id=first.run_id,
        first_time_ms=first.time_ms,
        runs_around=[r.run_id for r in rows[max(0, cp.index - 3) : cp.index + 3]],
    )
