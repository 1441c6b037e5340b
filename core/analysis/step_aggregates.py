"""A run's per-step aggregates from its stored items, results and timelines (pure).

Each step is aggregated over its own clients (core.analysis.aggregate). Scaling efficiency compares
a step only with the 1-client step of the same workload: same resolved workload (bs,
iodepth, numjobs, rate, ...) on the same mounts, or for the steps a rate curve or a
``target_iops`` plan resolves per client count, the same point of the sweep. Where no such
step exists there is no efficiency.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.analysis.aggregate import FailedClient, aggregate
from core.analysis.ceilings import ClientFacts, latency_knee, step_ceilings
from core.analysis.concurrency import outstanding_ios
from core.models import Direction, DirectionResult, Result, StepAggregate
from core.models.ids import body_hash, comparison_key, step_id
from core.models.stored import Item, Run, Step
from core.timeline import ClientSample, ClientTimeline
from core.timestamps import iso_ms

# Steps resolved per client count: their workload differs with the count by design.
DYNAMIC_MODES = ("rate", "sized")


def like_key(step: Step, run_workload: Mapping[str, Any]) -> str:
    """Steps with the same key ran the same workload, whatever their client count."""
    if step.mode in DYNAMIC_MODES:
        return body_hash({"mode": step.mode, "point": step.point})
    workload = step.workload.model_dump(mode="json") if step.workload else run_workload
    return body_hash({"workload": workload})


def sample_from_result(
    r: Result,
    *,
    files_per_target: int = 1,
    timeline: ClientTimeline | None = None,
    step_start_ms: int | None = None,
) -> ClientSample:
    """One client of a step. Its start skew is measured against the step's common instant
    when given (a client re-run later with a fresh instant of its own shows its true
    distance from the others), else against the instant it was given."""
    w = r.workload
    dirs: dict[Direction, DirectionResult] = {}
    if r.read is not None:
        dirs["read"] = r.read
    if r.write is not None:
        dirs["write"] = r.write
    skew = r.start.skew_ms if r.start else None
    if step_start_ms is not None and r.start is not None:
        io_start = r.started_at_ms - w.ramp_time * 1000
        skew = io_start - step_start_ms
    return ClientSample(
        has_bins=r.engine == "fio",  # DiskSpd exports percentiles, not a histogram
        client=r.client,
        dirs=dirs,
        timeline=timeline,
        agent_id=r.agent_id,
        outstanding_ios=outstanding_ios(r.engine, w, len(r.targets), files_per_target),
        rate_cap_iops=float(w.rate_iops) if w.rate_iops is not None else None,
        start_skew_ms=skew,
    )


def client_facts(r: Result) -> ClientFacts:
    """What the ceilings need from a stored result: VM size, CPUs and counters."""
    return ClientFacts(r.client, r.agent_id, r.host.vm_size, r.host.cpu_count, r.counters)


def _mark_knees(out: list[StepAggregate]) -> list[StepAggregate]:
    """Each rate curve (the rate steps of one client count and repetition, in the order
    they ran) gets its latency knee marked on the step where it is."""
    curves: dict[tuple[int, int], list[int]] = {}
    for n, agg in enumerate(out):
        if agg.mode in ("rate-max", "rate"):
            curves.setdefault((agg.clients, agg.repetition), []).append(n)
    marked = list(out)
    for curve in curves.values():
        # The unthrottled step finds the maximum first; the curve runs from the lowest rate.
        ordered = sorted(curve, key=lambda n: (out[n].mode == "rate-max", out[n].step))
        knee = latency_knee([out[n] for n in ordered])
        if knee is not None:
            n = ordered[knee[0]]
            marked[n] = out[n].model_copy(update={"knee": knee[1]})
    return marked


@dataclass(frozen=True)
class _StepRun:
    """A step that produced results: its clients' samples and those that failed."""

    step: Step
    samples: list[ClientSample]
    failed: list[FailedClient]
    results: list[Result]


def _step_runs(
    run: Run,
    steps: Sequence[Step],
    items: Sequence[Item],
    by_item: Mapping[str, Result],
    timelines: Mapping[str, ClientTimeline],
) -> list[_StepRun]:
    out = []
    for s in sorted(steps, key=lambda s: s.step):
        members = [i for i in items if i.step == s.step]
        stored = [by_item[i] for i in sorted(i.id for i in members) if i in by_item]
        if not stored:
            continue  # a step that never ran (barrier failed) has no aggregate
        samples = [
            sample_from_result(
                by_item[i.id],
                files_per_target=run.files_per_target,
                timeline=timelines.get(i.id),
                step_start_ms=s.start_at_ms,
            )
            for i in members
            if i.id in by_item
        ]
        failed = [
            FailedClient(i.client, i.agent_id, i.reason or i.state.value)
            for i in members
            if i.id not in by_item
        ]
        out.append(_StepRun(s, samples, failed, stored))
    return out


def _single_client_iops(
    per_step: Sequence[_StepRun], run_workload: Mapping[str, Any]
) -> dict[str, float]:
    """The 1-client reference of each workload: the mean of its complete, kept steps."""
    singles: dict[str, list[float]] = {}
    for r in per_step:
        if r.step.clients == 1 and not r.failed and not r.step.discarded:
            one = aggregate(r.samples)
            singles.setdefault(like_key(r.step, run_workload), []).append(one.total_iops)
    return {key: sum(refs) / len(refs) for key, refs in singles.items()}


def _step_aggregate(
    run: Run, r: _StepRun, run_workload: Mapping[str, Any], single: float | None, now_ms: int
) -> StepAggregate:
    s = r.step
    figures = aggregate(
        r.samples, failed=r.failed, expected_clients=s.clients, single_client_iops=single
    )
    workload = s.workload.model_dump(mode="json") if s.workload else run_workload
    # What bound the step (core.analysis.ceilings): the run's recorded target facts,
    # each client's VM size and counters.
    ceilings, bound = step_ceilings(figures, run.target_facts, [client_facts(x) for x in r.results])
    return StepAggregate(
        id=step_id(run.id, s.step),
        run_id=run.id,
        step=s.step,
        target=run.target,
        created_at=iso_ms(now_ms),
        mode=s.mode,
        point=s.point,
        repetition=s.repetition,
        discarded=s.discarded,
        workload=s.workload or run.workload,
        like_key=like_key(s, run_workload),
        # What makes this step's figures comparable with another run's (issue: series).
        comparison_key=comparison_key(run.engine, workload, run.targets, s.clients),
        **dict(figures),
        ceilings=ceilings,
        bound_by=bound,
    )


def build_aggregates(
    run: Run,
    steps: Sequence[Step],
    items: Sequence[Item],
    results: Sequence[Result],
    timelines: Mapping[str, ClientTimeline] | None = None,
    *,
    now_ms: int,
) -> list[StepAggregate]:
    """One aggregate per step that produced results. ``timelines`` by item id; ``now_ms``
    (the service's clock) stamps them."""
    by_item = {r.item_id: r for r in results}
    per_step = _step_runs(run, steps, items, by_item, timelines or {})
    run_workload = run.workload.model_dump(mode="json")
    singles = _single_client_iops(per_step, run_workload)
    out = [
        _step_aggregate(run, r, run_workload, singles.get(like_key(r.step, run_workload)), now_ms)
        for r in per_step
    ]
    return _mark_knees(out)
