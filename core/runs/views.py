"""What callers see of runs, steps, items and results (pure reads over the repositories).

Views leave out what is internal (ETags, message ids, principals) and what is large (fio's
raw output and histogram bins stay in the full result and in Blob Storage).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from core.analysis.curves import latency_curve, repetition_spread, scaleout_curve
from core.artifacts import unpack_json
from core.engines.fio_output import DIRECTIONS
from core.errors import NotFound
from core.fleet.usage import run_usage
from core.models import Direction, FullResult, Result, ResultSummary, StepAggregate
from core.models.answers import Curves
from core.models.state import FINISHED_RUN, DeliveryState, ItemState, RunState
from core.models.stored import Item, Run, Step
from core.models.views import ItemView, RunList, RunSummary, RunView, StepView, Usage
from core.ports import Store
from core.runs.admission import Admission, lock_keys
from core.runs.guardrails import TargetInfo
from core.runs.lifecycle import Lifecycle
from core.timeline import ClientTimeline, Window, per_second

FINISHED_VIEWS = 512  # views of finished runs kept in memory (each a few KiB)

_RUN_PUBLIC = (
    "id",
    "state",
    "created_at",
    "updated_at",
    "target",
    "targets",
    "pool",
    "tags",
    "request",
    "items_total",
    "engine",
    "profile",
    "profile_version",
    "workload",
    "comparison_key",
    "fill",
    "step_count",
    "error",
    "cancel_requested",
    "requested_by",
    "provisioning",
    "gate",
)


class TargetState(TargetInfo):
    """A registered target, who holds it and how many runs wait for it."""

    busy: bool
    holder: str | None = Field(description="the run holding it")
    waiting: int


class TargetList(BaseModel):
    targets: list[TargetState]


def _troubled(run: Run) -> bool:
    # A step held while its pool grows is not a delivery in trouble: `provisioning` says it.
    return run.delivery.state == DeliveryState.FAILED or (
        run.delivery.state == DeliveryState.PENDING and run.provisioning is None
    )


def public_run(run: Run, items: list[Item] | None = None) -> RunSummary:
    counts: dict[ItemState, int] | None = None
    if items is not None:
        counts = {}
        for i in items:
            counts[i.state] = counts.get(i.state, 0) + 1
    return RunSummary(
        **{k: getattr(run, k) for k in _RUN_PUBLIC},
        delivery=run.delivery if _troubled(run) else None,
        # Where an operator finds the run's trace (docs/operations.md).
        trace_id=run.traceparent.split("-")[1] if run.traceparent else None,
        counts=counts,
    )


def public_step(step: Step, aggregate: StepAggregate | None) -> StepView:
    return StepView(
        step=step.step,
        clients=step.clients,
        mode=step.mode,
        point=step.point,
        repetition=step.repetition,
        discarded=step.discarded,
        workload=step.workload,
        start_at_ms=step.start_at_ms,
        failed_reason=step.failed_reason,
        aggregate=aggregate,
    )


def public_item(item: Item, result: Result | None) -> ItemView:
    return ItemView(
        id=item.id,
        step=item.step,
        client=item.client,
        state=item.state,
        agent_id=item.agent_id,
        attempts=item.attempts,
        errors=item.errors,
        reason=item.reason,
        claimed_at=item.claimed_at,
        ready_at=item.ready_at,
        started_at=item.started_at,
        ended_at=item.ended_at,
        start_at_ms=item.start_at_ms,
        rebarriered=item.rebarriered,
        result=ResultSummary.of(result) if result else None,
    )


def _series(
    timeline: ClientTimeline | None, window: Window | None
) -> dict[Direction, list[dict[str, float]]]:
    """A client's IOPS and bytes in each second of the window, per direction it ran."""
    if timeline is None or window is None:
        return {}
    return {
        d: per_second([timeline], d, window)
        for d in DIRECTIONS
        if timeline.direction(d) is not None
    }


class Views:
    def __init__(
        self,
        store: Store,
        admission: Admission,
        lifecycle: Lifecycle,
        price_of: Callable[[str], float | None] = lambda pool: None,
    ) -> None:
        self.store = store
        self.admission = admission
        self.life = lifecycle
        self.price_of = price_of  # a pool's hourly price per client VM (BENCH_POOLS)
        # A finished run whose items have all ended never changes again but by a write to
        # its own document (which changes its ETag): its view is kept, keyed by that ETag,
        # so reading it again costs one point read instead of four calls.
        self._finished: OrderedDict[str, tuple[str, RunView]] = OrderedDict()
        self._finished_lock = threading.Lock()

    def summary(self, run: Run, items: list[Item] | None = None) -> RunSummary:
        """The run as its submitter is told: its state, and its place in line if waiting."""
        out = public_run(run, items)
        if run.state == RunState.WAITING:
            return out.model_copy(update={"queue_position": self.admission.position(run)})
        return out

    def get_run(self, run_id: str) -> RunView:
        run = self.store.runs.get(run_id)
        with self._finished_lock:
            kept = self._finished.get(run_id)
        if kept is not None and run.etag is not None and kept[0] == run.etag:
            return kept[1]  # frozen: nobody changes what they are given
        steps, items = self.store.items.of_run(run_id)
        view = self._run_view(run, steps, items)
        settled = run.finished and not run.due_ms and all(i.ended for i in items)
        if run.state in FINISHED_RUN and settled and run.etag is not None:
            self._keep(run.etag, view)
        return view

    def _run_view(self, run: Run, steps: list[Step], items: list[Item]) -> RunView:
        # A result exists only for an item that completed, and aggregates only once the
        # run is finalized: a running run's view reads neither (half the calls of a poll).
        done = any(i.state == ItemState.COMPLETED for i in items)
        results = {r.item_id: r for r in self.store.results.of_run(run.id)} if done else {}
        stored = self.store.results.list_aggregates(run.id) if run.finalized else []
        aggregates = {a.step: a for a in stored}
        public_steps = [
            public_step(s, aggregates.get(s.step)) for s in sorted(steps, key=lambda s: s.step)
        ]
        ordered = sorted(items, key=lambda i: (i.step, i.client))
        usage = run_usage(items, self.life.now_ms(), self.price_of(run.pool))
        return RunView(
            **dict(self.summary(run, items)),
            usage=Usage.model_validate(usage),
            steps=public_steps,
            items=[public_item(i, results.get(i.id)) for i in ordered],
            aggregate=public_steps[-1].aggregate if public_steps else None,
        )

    def _keep(self, etag: str, view: RunView) -> None:
        with self._finished_lock:
            self._finished[view.id] = (etag, view)
            self._finished.move_to_end(view.id)
            while len(self._finished) > FINISHED_VIEWS:
                self._finished.popitem(last=False)

    def list_runs(
        self,
        *,
        target: str | None = None,
        state: str | None = None,
        tag: tuple[str, str] | None = None,
        limit: int = 50,
        continuation: str | None = None,
    ) -> RunList:
        runs, token = self.store.runs.page(
            target=target, state=state, tag=tag, limit=limit, continuation=continuation
        )
        return RunList(runs=[public_run(r) for r in runs], continuation=token)

    def curves(self, run_id: str) -> Curves:
        self.store.runs.get(run_id)  # 404 for an unknown run
        aggs = sorted(self.store.results.list_aggregates(run_id), key=lambda a: a.step)
        return Curves(
            run_id=run_id,
            latency=latency_curve(aggs),
            scaleout=scaleout_curve(aggs),
            repetitions=repetition_spread(aggs),
        )

    def targets(self, registry: list[TargetInfo]) -> list[TargetState]:
        """The target registry with who holds each target and how many wait: one lock
        document read per target."""
        out = []
        for t in registry:
            lock = self.admission.lock_of(lock_keys(t.pool, [t.alias])[0])
            holder = lock.run_id if lock and self.admission.holds(lock, "") else None
            waiting = len(lock.queue) if lock else 0
            out.append(
                TargetState(**dict(t), busy=holder is not None, holder=holder, waiting=waiting)
            )
        return out

    def full_result(self, run_id: str, item_id: str, *, common: bool = False) -> FullResult:
        """A client's result with its per-second series and the engine's own output, read
        back from Blob Storage. The series covers the client's own measured period, or with
        ``common`` its step's common window, the same seconds for every client of the step
        (``series_window`` says which)."""
        stored = self.store.results.get(run_id, item_id)
        timeline = self.life.timeline_of(stored)
        own = (timeline.start_ms, timeline.end_ms) if timeline else None
        shared = self._step_window(run_id, stored.step) if common and timeline is not None else None
        raw, removed = self._raw(run_id, item_id) if "raw" in stored.artifacts else (None, None)
        return FullResult(
            # The timeline is the series below; carried artifacts are never kept, but an
            # imported document (an admin's archive) may still hold them.
            **(dict(stored) | {"inline_timeline": None, "inline_artifacts": None}),
            series_window="common" if shared else "own",
            series=_series(timeline, shared or own),
            raw=raw,
            raw_removed=removed,
        )

    def _step_window(self, run_id: str, step: int) -> Window | None:
        """The common window of the client's step, once its aggregate is stored."""
        agg = next((a for a in self.store.results.list_aggregates(run_id) if a.step == step), None)
        if agg is None or agg.window is None:
            return None
        return agg.window.start_ms, agg.window.end_ms

    def _raw(self, run_id: str, item_id: str) -> tuple[Any, bool | None]:
        """The engine's own output, or True for removed: raw output is kept for a while
        only (core.retention)."""
        try:
            return unpack_json(self.life.artifacts.get(run_id, item_id, "raw")), None
        except NotFound:
            return None, True
