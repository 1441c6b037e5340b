"""The regression gate, defined once (pure): is a run's point on its series a regression,
an improvement, within the noise, or is there not enough history to say?

The monitor applies it when a run is finalized (core.monitoring.monitor), the run keeps the
verdict (``gate`` in GET /api/runs/{id}) and benchctl's exit code is that verdict.

For each measured step and each gated metric (IOPS, bandwidth and p99 total latency,
``read.lat.p99``, of each direction the step did: the latency the published methods report,
core.latency; completion latency and the other percentiles are watched by change-point
detection alone):

1. **Reference.** The earlier points of the step's series in the same infrastructure
   segment (a new VM size, mount source or options starts a new segment: no reference, never
   a regression), from the first run of the latest change on that metric triaged
   ``expected`` on, leaving out the points the gate itself judged a regression or an
   improvement on that metric (a suspected change is not the norm; after an accepted
   change, the points judged before it was accepted count), the latest ``max_points`` (20).
2. Fewer than ``min_points`` (5) reference points: **not enough history**.
3. **Noise model.** The reference's median, and its spread as a standard deviation
   estimated robustly: 1.4826 times the median absolute deviation (equal to the standard
   deviation for normal noise; one disturbed reference run, a busy neighbour or a cold cache,
   does not widen the band as it would widen the sample standard deviation). The band is
   the larger of ``pct`` percent (``BENCH_GATE_PCT``, default 10) and ``sigmas`` (3) such
   standard deviations, as a percentage of the median.
4. A value worse than the median by more than the band is a **regression**, better by more
   an **improvement**, otherwise **pass**. Worse: lower IOPS or bandwidth, higher latency.
5. A **change point** (E-divisive means, core.analysis.changepoint) is attributed to the
   first run after the change; a run a change point is attributed to fails on that metric
   too (a run of several repetitions can be one).
6. **Bandwidth follows IOPS.** A workload has one block size, so bandwidth is IOPS times it:
   it takes the IOPS verdict (with figures of its own), and the two never disagree.

The run's verdict: ``regression`` when any metric's is, else ``improvement`` when any is,
else ``pass`` when any is, else ``not-enough-history``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from core.models.gate import (
    Accepted,
    ChangePointRef,
    GateRule,
    MetricVerdict,
    Reference,
    RunGate,
    Verdict,
)
from core.models.regression import Change, MeanStd
from core.models.series import StepPoint

__all__ = [
    "Accepted",
    "GateRule",
    "MetricVerdict",
    "RunGate",
    "Verdict",
    "attribute",
    "judge_point",
    "judge_value",
    "run_verdict",
]

DIRECTIONS = ("read", "write")
# metric name within a direction -> higher is better; the order verdicts are listed in
GATED: dict[str, bool] = {"iops": True, "bw_bytes": True, "lat.p99": False}
FOLLOWS = {"bw_bytes": "iops"}  # bandwidth takes the IOPS verdict (one block size)
MAD_TO_SD = 1.4826  # the median absolute deviation of normal noise is 0.6745 sd


def judge_value(
    values: Sequence[float], value: float, *, higher_is_better: bool, rule: GateRule
) -> tuple[Verdict, float | None, float | None, float | None, float | None]:
    """(verdict, median, sd, change %, band %) of one value against its reference values
    (rules 2 to 4 of the module doc)."""
    if len(values) < rule.min_points:
        return "not-enough-history", None, None, None, None
    median = statistics.median(values)
    sd = MAD_TO_SD * statistics.median(abs(v - median) for v in values)
    if median <= 0:  # nothing to take a percentage of (an idle direction): nothing to judge
        return "pass", median, sd, None, None
    change = (value - median) / median * 100
    band = max(rule.pct, rule.sigmas * sd / median * 100)
    if abs(change) <= band:
        return "pass", median, sd, change, band
    better = (change > 0) == higher_is_better
    return ("improvement" if better else "regression"), median, sd, change, band


def stored_verdict(point: StepPoint, metric: str) -> str | None:
    kept = point.gate.get(metric)
    return kept.verdict if kept is not None else None


def reference(
    metric: str,
    point: StepPoint,
    segment: Sequence[StepPoint],
    accepted: Sequence[Accepted],
    rule: GateRule,
) -> tuple[list[StepPoint], str | None]:
    """The reference points of ``metric`` for ``point`` (rule 1 of the module doc) among the
    earlier points of its segment (time order), and the accepted change it starts at."""
    own = [a for a in accepted if a.metric == metric]
    since = max(own, key=lambda a: a.first_time_ms) if own else None
    kept = []
    for p in segment:
        if p.id == point.id or metric not in p.metrics:
            continue
        if (p.time_ms, p.id) > (point.time_ms, point.id):
            continue  # a later run finalized first: not part of this one's past
        if since is not None and p.time_ms < since.first_time_ms:
            continue
        judged = stored_verdict(p, metric)
        before_acceptance = since is not None and _judged_ms(p) <= since.accepted_ms
        if judged in ("regression", "improvement") and not before_acceptance:
            continue
        kept.append(p)
    return kept[-rule.max_points :], since.first_run_id if since else None


def _judged_ms(point: StepPoint) -> int:
    return point.judged_at_ms or point.time_ms


def judge_point(
    point: StepPoint,
    segment: Sequence[StepPoint] | None,
    accepted: Sequence[Accepted],
    rule: GateRule,
) -> list[MetricVerdict]:
    """Every gated metric of a series point against the earlier points of its
    infrastructure segment; ``segment`` None: the point starts a new segment."""
    out: list[MetricVerdict] = []
    for d in DIRECTIONS:
        by_name: dict[str, MetricVerdict] = {}
        for name, higher in GATED.items():
            if f"{d}.{name}" in point.metrics:
                by_name[name] = _judge_metric(
                    point, d, name, higher, by_name, segment, accepted, rule
                )
        out += by_name.values()
    return out


def _judge_metric(
    point: StepPoint,
    direction: str,
    name: str,
    higher: bool,
    judged: dict[str, MetricVerdict],
    segment: Sequence[StepPoint] | None,
    accepted: Sequence[Accepted],
    rule: GateRule,
) -> MetricVerdict:
    """One metric of a point; bandwidth takes the verdict of IOPS judged before it."""
    metric = f"{direction}.{name}"
    leader = FOLLOWS.get(name)
    basis = (
        f"{direction}.{leader}" if leader and f"{direction}.{leader}" in point.metrics else metric
    )
    refs: list[StepPoint] = []
    since: str | None = None
    if segment is not None:
        refs, since = reference(basis, point, segment, accepted, rule)
    values = [float(p.metrics[metric]) for p in refs if metric in p.metrics]
    value = float(point.metrics[metric])
    verdict, median, sd, change, band = judge_value(
        values, value, higher_is_better=higher, rule=rule
    )
    follows = None
    if basis != metric and leader in judged:
        verdict, follows = judged[leader].verdict, basis
    ref = Reference(
        points=len(values),
        median=median,
        sd=sd,
        first_run_id=refs[0].run_id if refs else None,
        last_run_id=refs[-1].run_id if refs else None,
        since_run_id=since,
    )
    mv = MetricVerdict(
        step=point.step,
        series_key=point.series_key,
        metric=metric,
        verdict=verdict,
        value=value,
        reference=ref,
        change_pct=change,
        band_pct=band,
        follows=follows,
        why="",
    )
    mv.why = explain(mv, rule, new_segment=segment is None)
    return mv


def attribute(
    verdicts: list[MetricVerdict], changes: Sequence[Change], run_id: str, rule: GateRule
) -> None:
    """Rule 5: a change point whose first run is this run judges its metric too (a
    regression always wins; an improvement only over a pass)."""
    for v in verdicts:
        for c in changes:
            if c.metric != v.metric or c.first_run_id != run_id:
                continue
            v.change_point = _change_point(c)
            if c.kind == "regression" or v.verdict in ("pass", "not-enough-history"):
                v.verdict = c.kind
                v.why = explain(v, rule)


def _change_point(c: Change) -> ChangePointRef:
    before = c.before.mean if isinstance(c.before, MeanStd) else c.before.median
    return ChangePointRef(
        change_pct=float(c.change_pct or 0.0),
        pvalue=c.pvalue,
        before_mean=float(before or 0.0),
        after_mean=c.after.mean,
    )


def run_verdict(verdicts: Sequence[MetricVerdict]) -> Verdict:
    found = {v.verdict for v in verdicts}
    order: tuple[Verdict, ...] = ("regression", "improvement", "pass")
    return next((v for v in order if v in found), "not-enough-history")


def explain(v: MetricVerdict, rule: GateRule, *, new_segment: bool = False) -> str:
    """One sentence a person reads in a pipeline's log."""
    ref = v.reference
    if v.change_point is not None and v.verdict in ("regression", "improvement"):
        cp = v.change_point
        return (
            f"a change point starts at this run: {cp.before_mean:.6g} -> {cp.after_mean:.6g} "
            f"({cp.change_pct:+.1f} %)"
        )
    if v.follows is not None and v.verdict != "not-enough-history":
        return f"follows {v.follows} (bandwidth is IOPS x the block size)"
    if v.verdict == "not-enough-history":
        if new_segment:
            return "first run on new infrastructure: nothing to compare with yet"
        return f"{ref.points} reference run(s); the gate needs {rule.min_points}"
    if v.change_pct is None or v.band_pct is None:
        return "the reference median is 0: nothing to compare"
    where = {"pass": "within", "regression": "worse than", "improvement": "better than"}
    return (
        f"{v.value:.6g} is {v.change_pct:+.1f} % from the median {ref.median:.6g} of "
        f"{ref.points} runs: {where[v.verdict]} the band of {v.band_pct:.1f} %"
    )
