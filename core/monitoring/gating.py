"""The monitor's side of the regression gate (core.analysis.gate): the series point's
earlier segment, the changes triaged expected, the gate's regressions with their evidence,
and which stored regression a failure counts in."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from core.analysis.gate import Accepted
from core.analysis.series import metric_name, segments
from core.models.gate import MetricVerdict
from core.models.regression import OPEN_STATES, Change, MeanStd, MedianSd, Regression
from core.models.series import StepPoint

# The gate's regressions are stored for IOPS, bandwidth (which follows IOPS: the records
# of the two always match) and p99 total latency; p50 and p99.9, and completion latency,
# are watched by change-point detection alone.
GATE_RECORDED = tuple(
    f"{d}.{m}" for d in ("read", "write") for m in ("iops", "bw_bytes", "lat.p99")
)


def segment_of(point: StepPoint, history: Sequence[StepPoint]) -> list[StepPoint] | None:
    """The earlier points of the latest infrastructure segment, when this point shares its
    infrastructure; None after an infrastructure change (a new segment starts here)."""
    segs = segments(history)
    if not segs:
        return []
    latest = segs[-1]
    return list(latest) if latest[-1].infra == point.infra else None


def _ms(iso: str | None) -> int | None:
    if not iso:
        return None
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def accepted(regressions: Sequence[Regression]) -> list[Accepted]:
    """Changes triaged expected: the level after them is the norm (gate rule 1)."""
    out = []
    for r in regressions:
        accepted_ms = r.triaged_at_ms or _ms(r.triaged_at)
        if r.state == "expected" and accepted_ms is not None:
            out.append(
                Accepted(
                    metric=metric_name(r.metric),
                    first_run_id=r.first_run_id,
                    first_time_ms=r.first_time_ms,
                    accepted_ms=accepted_ms,
                )
            )
    return out


def gate_changes(point: StepPoint, judged: Sequence[MetricVerdict]) -> list[Change]:
    """The gate's regressions of this point, with their evidence."""
    out = []
    for v in judged:
        if v.metric not in GATE_RECORDED or v.verdict != "regression" or v.change_point:
            continue  # a change point attributed to the run is stored as found
        ref = v.reference
        out.append(
            Change(
                metric=v.metric,
                kind="regression",
                method="gate",
                # What the gate judged by (core.analysis.gate, rule 3): the reference's
                # median and its robust sd, not a mean (change points give mean and std).
                before=MedianSd(median=ref.median, sd=ref.sd),
                after=MeanStd(mean=v.value, std=0.0),
                change_pct=v.change_pct,
                pvalue=None,
                first_run_id=point.run_id,
                first_time_ms=point.time_ms,
                runs_around=[r for r in (ref.last_run_id,) if r] + [point.run_id],
            )
        )
    return out


def open_regressions(regressions: Sequence[Regression], metric: str) -> list[Regression]:
    return [
        r
        for r in regressions
        if metric_name(r.metric) == metric_name(metric)
        and r.kind == "regression"
        and r.state in OPEN_STATES
    ]


def link(judged: Sequence[MetricVerdict], regressions: Sequence[Regression], run_id: str) -> None:
    """Each failed metric names the stored regression it counts in: one first seen on this
    run, else the metric's open one (the same event, still neither fixed nor accepted)."""
    for v in judged:
        if v.verdict != "regression":
            continue
        mine = [
            r for r in regressions if metric_name(r.metric) == v.metric and r.first_run_id == run_id
        ]
        found = mine or sorted(
            open_regressions(regressions, v.metric), key=lambda r: r.first_time_ms
        )
        if found:
            v.regression_id = found[-1].id
