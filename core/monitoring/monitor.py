"""Continuous monitoring: series points, change-point regressions and their notification.

Called by the timer after it stores a run's aggregates. Everything written has a
deterministic id (points per run step, regressions per series, metric and first run after
the change), so two timers racing write each once, and only the one whose write created a
regression sends its notification: never twice, never again on the next tick.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.analysis.compare import (
    NOISE_SIGMAS,
    compare_aggregates,
    compare_phase,
    noise_pct,
    summary,
)
from core.analysis.gate import attribute, judge_point, run_verdict
from core.analysis.magnitude import DEFAULT_MIN_MAGNITUDE_PCT
from core.analysis.series import (
    METRICS,
    find_changes,
    infra_facts,
    infra_fingerprint,
    metric_name,
    metrics_of,
    segments,
    series_key,
)
from core.errors import FieldError, NotFound, ValidationFailed
from core.models import Result, StepAggregate
from core.models.answers import CompareRow, Comparison, RunFacts
from core.models.gate import GateRule, MetricVerdict, RunGate
from core.models.regression import (
    TRIAGE_STATES,
    Change,
    Regression,
    Told,
    ToldWith,
    TriageState,
)
from core.models.series import HistoryRow, SeriesHistory, SeriesSummary, StepPoint
from core.models.stored import Run
from core.models.views import RunView
from core.monitoring.gating import (
    accepted,
    gate_changes,
    link,
    open_regressions,
    segment_of,
)
from core.ports import NoNotifier, Notifier, Store
from core.runs.guardrails import LOCAL_CALLER, Caller
from core.runs.ownership import check_owner
from core.timestamps import iso_ms

__all__ = ["TRIAGE_STATES", "Monitor", "Recorded", "TriageState", "step_series_key"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recorded:
    """What recording a run did: the regressions it created, and the run's gate verdict."""

    created: list[Regression]
    gate: RunGate


class Monitor:
    def __init__(
        self,
        store: Store,
        notifier: Notifier | None = None,
        *,
        gate_pct: float = 10.0,
        min_magnitude_pct: float = DEFAULT_MIN_MAGNITUDE_PCT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.clock = clock
        self.notifier = notifier or NoNotifier()
        self.rule = GateRule(pct=gate_pct)
        self.min_magnitude_pct = min_magnitude_pct  # change points smaller than this are noise

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def record(
        self, run: Run, aggregates: Sequence[StepAggregate], results: Sequence[Result]
    ) -> Recorded:
        """Add the run's steps to their series, judge each by the gate (core.analysis.gate),
        run detection, store and announce new regressions."""
        created: list[Regression] = []
        verdicts: list[MetricVerdict] = []
        for agg in aggregates:
            if agg.discarded or agg.mode in ("probe", "sized"):
                continue  # warm-ups and Little's-law probes are not the benchmark
            step_results = [r for r in results if r.step == agg.step]
            if not step_results:
                continue
            judged, new = self._record_step(run, agg, step_results)
            created += new
            verdicts += judged
        gate = RunGate(verdict=run_verdict(verdicts), rule=self.rule, metrics=verdicts)
        return Recorded(created, gate)

    def _record_step(
        self, run: Run, agg: StepAggregate, step_results: Sequence[Result]
    ) -> tuple[list[MetricVerdict], list[Regression]]:
        """One measured step: its point stored with the gate's verdicts, its changes."""
        point = self._point(run, agg, step_results)
        key = point.series_key
        history = [p for p in self._points(key) if p.id != point.id]
        existing = self.store.series.regressions(key)
        judged = judge_point(point, segment_of(point, history), accepted(existing), self.rule)
        changes = find_changes([*history, point], min_magnitude_pct=self.min_magnitude_pct)
        attribute(judged, changes, run.id, self.rule)
        point.gate = {v.metric: v.kept() for v in judged}
        self.store.series.create_point(point)
        created = self._store_changes(
            key, run.target, changes + gate_changes(point, judged), existing
        )
        link(judged, existing, run.id)
        return judged, created

    def _point(self, run: Run, agg: StepAggregate, step_results: Sequence[Result]) -> StepPoint:
        # The series functions read the aggregate's and the results' JSON, as they read a
        # run's view (core.monitoring.baseline).
        doc = agg.doc()
        facts = infra_facts(step_results, run.target_facts)
        key = step_series_key(run.engine, run.targets, agg)
        return StepPoint(
            id=f"{key}.{run.id}.s{agg.step}",
            series_key=key,
            run_id=run.id,
            step=agg.step,
            target=run.target,
            time_ms=min(r.started_at_ms for r in step_results),
            judged_at_ms=self.now_ms(),
            infra=infra_fingerprint(facts),
            infra_facts=facts,
            metrics=metrics_of(doc),
            clients=agg.clients,
            engine=run.engine,
            workload=doc.get("workload"),
            tags=run.tags,
        )

    def detect(self, key: str, target: str) -> list[Regression]:
        """Change-point detection again over a series' stored points (after a change of
        threshold, or points written by a tool): stores and announces the changes not
        stored yet, as ``record`` does; returns those it created."""
        changes = find_changes(self._points(key), min_magnitude_pct=self.min_magnitude_pct)
        return self._store_changes(key, target, changes, self.store.series.regressions(key))

    def _points(self, key: str) -> list[StepPoint]:
        """The series' stored points, their metrics under their current names."""
        return [p.named() for p in self.store.series.points(key)]

    def _store_changes(
        self, key: str, target: str, changes: Sequence[Change], existing: list[Regression]
    ) -> list[Regression]:
        """Store the changes not seen before (``existing`` grows with those stored)."""
        created = []
        for change in changes:
            if any(_same_change(change, e) for e in existing):
                continue  # seen before: by the gate, or with its index moved by new points
            reg = Regression.model_validate(
                {
                    **dict(change),
                    "id": f"{key}.{change.metric}.{change.method}.{change.first_run_id}",
                    "series_key": key,
                    "target": target,
                    "state": "new",
                    "detected_at": iso_ms(self.now_ms()),
                    "notified": None,
                }
            )
            if not self.store.series.create_regression(reg):
                continue  # another timer instance stored it first
            created.append(reg)
            if reg.kind == "regression":
                reg = self._notify(reg, existing)
            existing.append(reg)
        return created

    def _notify(self, reg: Regression, existing: Sequence[Regression]) -> Regression:
        """One message per event: metrics that moved together in the same run share it."""
        told = next(
            (
                e
                for e in existing
                if e.kind == "regression" and e.notified and e.first_run_id == reg.first_run_id
            ),
            None,
        )
        notified: Told | ToldWith = (
            ToldWith.model_validate({"with": told.id})
            if told
            else Told(at=iso_ms(self.now_ms()), deliveries=self.notifier.notify(reg))
        )
        return self._update(
            reg.series_key, reg.id, lambda r: r.model_copy(update={"notified": notified})
        )

    def _update(
        self, key: str, reg_id: str, change: Callable[[Regression], Regression]
    ) -> Regression:
        return self.store.series.replace_regression(
            change(self.store.series.get_regression(key, reg_id))
        )

    # ---- queries ----------------------------------------------------------------------

    def list_series(self) -> list[SeriesSummary]:
        by_key: dict[str, SeriesSummary] = {}
        for p in self.store.series.all_points():
            s = by_key.get(p.series_key)
            if s is None:
                s = by_key[p.series_key] = SeriesSummary(
                    series_key=p.series_key,
                    target=p.target,
                    clients=p.clients,
                    engine=p.engine,
                    workload=p.workload,
                    points=0,
                    last_time_ms=0,
                )
            s.points += 1
            s.last_time_ms = max(s.last_time_ms, p.time_ms)
        return sorted(by_key.values(), key=lambda s: -s.last_time_ms)

    def history(self, key: str) -> SeriesHistory:
        points = sorted(self._points(key), key=lambda p: p.time_ms)
        segs = segments(points)
        rows = [
            HistoryRow.model_validate(
                {
                    "time_ms": p.time_ms,
                    "run_id": p.run_id,
                    "segment": i,
                    "new_segment": j == 0 and i > 0,
                    "infra_facts": p.infra_facts,
                    **{k: p.metrics.get(k) for k in sorted(METRICS)},
                    "gate": p.gate,
                }
            )
            for i, seg in enumerate(segs)
            for j, p in enumerate(seg)
        ]
        latest = points[-1] if points else None
        return SeriesHistory(
            series_key=key,
            target=latest.target if latest else None,
            clients=latest.clients if latest else None,
            engine=latest.engine if latest else None,
            workload=latest.workload if latest else None,
            segments=len(segs),
            history=rows,
            regressions=self.store.series.regressions(key),
        )

    def compare(self, run_a: RunView, run_b: RunView) -> Comparison:
        """Final aggregates side by side, judged against the noise of run A's series."""
        agg_a, agg_b = run_a.aggregate, run_b.aggregate
        noise: dict[str, float] = {}
        key = None
        if agg_a is not None:
            key = step_series_key(run_a.engine, run_a.targets, agg_a)
            noise = noise_pct(self._points(key), {run_a.id, run_b.id})
        rows = compare_aggregates(agg_a, agg_b, noise) if agg_a and agg_b else []
        if _phases(run_a) and _phases(run_b):
            # Metadata runs: every phase (create, stat, open, delete) is its own step.
            rows = self._compare_phases(run_a, run_b)
        return Comparison(
            a=_run_facts(run_a),
            b=_run_facts(run_b),
            comparable=run_a.comparison_key == run_b.comparison_key,
            series_key=key,
            noise_sigmas=NOISE_SIGMAS,
            rows=rows,
            summary=summary(rows),
        )

    def _compare_phases(self, run_a: RunView, run_b: RunView) -> list[CompareRow]:
        b_steps = _phases(run_b)
        rows: list[CompareRow] = []
        for op, agg_a in _phases(run_a).items():
            agg_b = b_steps.get(op)
            if agg_b is None:
                continue
            key = step_series_key(run_a.engine, run_a.targets, agg_a)
            noise = noise_pct(self._points(key), {run_a.id, run_b.id})
            rows += compare_phase(op, agg_a, agg_b, noise)
        return rows

    def regressions(self, state: str | None = None) -> list[Regression]:
        return [r for r in self.store.series.regressions() if state is None or r.state == state]

    def triage(
        self, key: str, reg_id: str, state: str, caller: Caller = LOCAL_CALLER
    ) -> Regression:
        """Engineers and admins triage any regression; a runner those first seen on its
        own runs."""
        if state not in TRIAGE_STATES:
            raise ValidationFailed([FieldError("state", f"one of {', '.join(TRIAGE_STATES)}")])
        reg = self.store.series.get_regression(key, reg_id)
        try:
            owner: str | None = self.store.runs.get(reg.first_run_id).owner
        except NotFound:
            owner = None
        check_owner(caller, owner, "first_run_id", f"regression {reg_id}")

        def triaged(r: Regression) -> Regression:
            now = self.now_ms()
            update = {"state": state, "triaged_at": iso_ms(now), "triaged_at_ms": now}
            return r.model_copy(update=update)

        return self._update(key, reg_id, triaged)


def step_series_key(engine: str, targets: Sequence[str], aggregate: StepAggregate) -> str:
    """The series a run's step belongs to (a digest of its workload's JSON, as stored)."""
    return series_key(
        engine=engine,
        targets=list(targets),
        clients=aggregate.clients,
        workload=aggregate.workload.model_dump(mode="json"),
        mode=aggregate.mode,
        point=aggregate.point,
    )


def _phases(run: RunView) -> dict[str, StepAggregate]:
    """A metadata run's last aggregate of each phase, by phase ("create", ...)."""
    out = {}
    for step in run.steps:
        agg = step.aggregate
        if agg is not None and agg.workload.metadata is not None and agg.workload.metadata.op:
            out[str(agg.workload.metadata.op)] = agg
    return out


def _run_facts(run: RunView) -> RunFacts:
    return RunFacts(
        id=run.id,
        state=run.state,
        target=run.target,
        profile=run.profile,
        engine=run.engine,
        created_at=run.created_at,
        tags=run.tags,
        clients=run.aggregate.clients if run.aggregate is not None else None,
    )


def _same_change(new: Change, old: Regression) -> bool:
    """The same event: a gate failure while the metric's regression is still open (new or
    acknowledged: the runs after it fail too until it is fixed or accepted), or changes
    whose runs overlap (a change point moves as points come in)."""
    if new.method == "gate" and open_regressions([old], new.metric):
        return True
    return (
        metric_name(new.metric) == metric_name(old.metric)
        and new.kind == old.kind
        and (new.first_run_id in old.runs_around or old.first_run_id in new.runs_around)
    )
