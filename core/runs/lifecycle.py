"""Advancing runs: the one place where a run moves on (pure logic over the repositories).

An agent's report changes only its own item and step (core.runs.protocol); when an item
ends, ``advance`` is called for its run, and the timer calls it for the runs that are due.
``advance`` recomputes the run's state from its items and steps and, as they allow: sends
the next step, stores the aggregates and tells the monitor once every step has run, frees
the run's targets and admits the runs waiting for them.

The timer never scans: it reads the runs whose ``due_ms`` has come (a failed delivery to
retry, a finish left half-done by a crash, a step running longer than it should) and the
step barriers past their deadline (failing the step; ``advance`` fails its items), and
starts waiting runs a crash left behind. A run that is simply running is not read until its
step should have ended. The first step's delivery (the outbox): core.runs.delivery; the
timer's tick, crash-only: core.runs.timer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from core import telemetry
from core.analysis.step_aggregates import build_aggregates
from core.artifacts import pack_json, sha256_hex, unpack_timeline
from core.errors import Conflict, NotFound, StoreUnavailable
from core.fleet.scaling import Waiting
from core.models.ids import step_id
from core.models.state import FINISHED_RUN, TERMINAL, DeliveryState, ItemState, RunState
from core.models.stored import Item, Run, Step, derive_run_state
from core.ports import Artifacts, Doc, Queue, Store
from core.runs.admission import Admission, run_keys
from core.runs.cas import update
from core.runs.delivery import DELIVERY_BACKOFF_MS, deliver
from core.runs.metadata import ends_later_phases
from core.runs.plan import plan_items, resolve_dynamic
from core.runs.provisioning import AwaitingAgents, hold
from core.runs.recorder import RunRecorder
from core.timeline import ClientTimeline
from core.timestamps import iso_ms

log = logging.getLogger(__name__)
STEP_SLACK_MS = 60_000  # a step's expected length plus this, then the timer looks
RECHECK_MS = 30_000  # a run found still running is looked at again this much later


class Lifecycle:
    def __init__(
        self,
        store: Store,
        queue: Queue,
        artifacts: Artifacts,
        admission: Admission,
        *,
        clock: Callable[[], float] = time.time,
        monitor: RunRecorder | None = None,
        on_finished: Callable[[str], object] | None = None,
    ) -> None:
        # How many agents an elastic pool lacks for a step of N clients, or None when it
        # has them (core.fleet.service.Fleet.waiting): the step waits for the pool to grow.
        self.pool_shortfall: Callable[[Run, int], Waiting | None] | None = None
        self.store = store
        self.queue = queue
        self.artifacts = artifacts
        self.admission = admission
        self.clock = clock
        self.monitor = monitor
        self.on_finished = on_finished  # told once per run, when it is finalized

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _stamp_run(self, run: Run) -> None:
        run.updated_at = iso_ms(self.now_ms())
        if run.landed_s is None and run.accept_by_s is not None:
            run.landed_s = run.ts  # its first change keeps when its creation was stored

    def _stamp_item(self, item: Item) -> None:
        if item.state in TERMINAL and item.ended_at is None:
            item.ended_at = iso_ms(self.now_ms())

    # ---- compare-and-swap on each kind of document --------------------------------------

    def update_run(
        self, run_id: str, change: Callable[[Run], bool | None], read: Run | None = None
    ) -> Run:
        """``read``: the run as just read, tried first (core.runs.cas.update's ``first``)."""
        return update(
            lambda: self.store.runs.get(run_id),
            self.store.runs.replace,
            change,
            f"run {run_id}",
            stamp=self._stamp_run,
            first=read,
        )

    def update_item(
        self,
        run_id: str,
        item: str,
        change: Callable[[Item], bool | None],
        read: Item | None = None,
    ) -> Item:
        """``read``: the item as just read, tried first (core.runs.cas.update's ``first``)."""
        get, put, stamp = self.store.items.get_item, self.store.items.replace_item, self._stamp_item
        return update(lambda: get(run_id, item), put, change, item, stamp=stamp, first=read)

    def update_step(self, run_id: str, step: int, change: Callable[[Step], bool | None]) -> Step:
        return update(
            lambda: self.store.items.get_step(run_id, step),
            self.store.items.replace_step,
            change,
            step_id(run_id, step),
        )

    # ---- sending steps ------------------------------------------------------------------

    def deliver(self, run: Run, *, creator: bool = False) -> Run:
        """Send an admitted run's first step (core.runs.delivery)."""
        return deliver(self, run, creator=creator)

    def enqueue_step(self, run: Run, number: int) -> None:
        """Resolve, create and send a step's items, then mark the step enqueued. Racing
        callers may both send: a second copy of an item is dropped at claim (another
        message id)."""
        step = self.store.items.get_step(run.id, number)
        if step.enqueued:
            return
        short = self.pool_shortfall
        waiting = short(run, step.clients) if short is not None else None
        if waiting is not None:
            raise AwaitingAgents(waiting)
        if step.workload is None:  # a rate-curve or target_iops step
            assert step.ref_step is not None
            ref = self._step_aggregate(run, step.ref_step)
            if ref is None:
                reason = f"step {step.ref_step} gave no result to size this step from"
                self.update_step(run.id, number, lambda s: None if s.fail(reason) else False)
                return
            resolved = resolve_dynamic(
                step,
                run.workload,
                ref,
                engine=run.engine,
                mounts=len(run.targets),
                files_per_target=run.files_per_target,
            )

            def resolve(s: Step) -> None:
                s.workload = resolved

            step = self.update_step(run.id, number, resolve)
        assert step.workload is not None
        work = plan_items(run, step, step.workload)  # one per client
        for w in work:
            try:
                self.store.items.create_item(
                    Item(id=w.item_id, run_id=run.id, step=w.step, client=w.client, work_item=w)
                )
            except Conflict:
                pass  # a replay finishing an interrupted send
        # Each message carries this span's trace context to its agent (adapters/queue.py).
        with telemetry.span("enqueue step", run.traceparent, run_id=run.id, step=number):
            for w in work:
                self.queue.send(w)

        self.update_step(run.id, number, lambda s: s.mark_sent())
        w0 = step.workload
        expected = (
            run.request.barrier_timeout_s + w0.ramp_time + w0.runtime + run.cooldown_s
        ) * 1000 + STEP_SLACK_MS

        def due(r: Run) -> None:
            r.due_ms = self.now_ms() + expected

        self.update_run(run.id, due)

    # ---- advancing ----------------------------------------------------------------------

    def advance(self, run_id: str) -> Run:
        """Recompute the run from its items and steps; send its next step once the previous
        one has ended; finish it (aggregates, monitor, targets freed, waiting runs admitted)
        once no item will run any more."""
        run = self.store.runs.get(run_id)
        steps, items = self.store.items.of_run(run_id)
        items = self._fail_with_steps(run_id, steps, items)
        if run.admitted and run.delivery.state == DeliveryState.PENDING:
            return run  # its first step is still to be sent (the timer retries)
        step_failed: list[str] = [s.failed_reason for s in steps if s.failed_reason]
        next_step = next((s for s in sorted(steps, key=lambda s: s.step) if not s.enqueued), None)
        all_ended = all(i.ended for i in items)
        # The steps before it have ended. Its own items may exist already: a send that
        # failed half-way (some messages out, not marked sent) is sent again, in full.
        before_ended = next_step is not None and all(
            i.ended for i in items if i.step != next_step.step
        )
        delivery_failed = run.delivery.state == DeliveryState.FAILED
        phase_failed = ends_later_phases(run.workload, items)
        if (
            next_step is not None
            and before_ended
            and run.admitted
            and not step_failed
            and not phase_failed
            and not run.cancel_requested
            and not delivery_failed
            and run.delivery.state == DeliveryState.SENT
        ):
            try:
                self.enqueue_step(run, next_step.step)
            except AwaitingAgents as e:
                held = hold(self, run, next_step.step, e.waiting)
                if held.provisioning is None and held.state not in FINISHED_RUN:
                    # Gave up (a run finished meanwhile is left as it was): the step fails.
                    why = held.error or "its pool did not grow"
                    self.update_step(
                        run_id, next_step.step, lambda s: None if s.fail(why) else False
                    )
                    return self.advance(run_id)
                return held
            except StoreUnavailable as e:
                log.warning("run %s: step %d not sent yet: %s", run_id, next_step.step, e)

                def retry(r: Run) -> None:
                    r.due_ms = self.now_ms() + DELIVERY_BACKOFF_MS[0]

                return self.update_run(run_id, retry)
            return self.advance(run_id)
        finished = delivery_failed or (
            all_ended
            and (next_step is None or bool(step_failed) or phase_failed or run.cancel_requested)
        )
        owes = (
            finished
            and run.admitted
            and not delivery_failed
            and not run.cancel_requested
            and not run.gave_up
            and not run.void
        )
        announce = owes and not run.finalized and self._finalize(run, steps, items)
        item_reasons: list[str] = [
            i.reason for i in items if i.state == ItemState.FAILED and i.reason
        ]

        def apply(r: Run) -> bool | None:
            if r.finished and r.state in FINISHED_RUN and (r.finalized or not owes):
                return False  # settled (a run the timer failed included): nothing to redo
            if not finished and (r.finished or r.finalized):
                # Items read before the last one ended, written after a call that saw it:
                # this call knows less than the one that finished the run.
                return False
            r.finished = finished
            r.provisioning = None  # its steps are sent: nothing is held
            derived = derive_run_state(
                items,
                cancel_requested=r.cancel_requested,
                finalized=r.finalized,
                finished=finished,
                admitted=r.admitted,
            )
            r.move(RunState.FAILED if delivery_failed else derived)
            if not delivery_failed:
                reasons = step_failed + item_reasons
                r.error = reasons[0] if reasons else None
            if finished:
                r.due_ms = self.now_ms() if owes and not r.finalized else None
            elif r.due_ms is not None and r.due_ms <= self.now_ms():
                r.due_ms = self.now_ms() + RECHECK_MS  # still running: look again later
            return None

        was_finished = run.finished
        run = self.update_run(run_id, apply)
        if run.finished and not was_finished and run.admitted:
            self.free_targets(run)
        if announce and self.on_finished is not None:
            self.on_finished(run.id)  # once, by whoever finalized it, with its final state
        return run

    def _fail_with_steps(self, run_id: str, steps: list[Step], items: list[Item]) -> list[Item]:
        """The items of a failed step that have not ended fail with it, saying why: the one
        place an item is failed for its step (an agent's call ends only its own)."""
        why = {s.step: s.failed_reason for s in steps if s.failed_reason}
        out = []
        for item in items:
            reason = why.get(item.step)
            if reason is not None and not item.ended:
                item = self.update_item(run_id, item.id, failing(reason))
            out.append(item)
        return out

    def _finalize(self, run: Run, steps: list[Step], items: list[Item]) -> bool:
        """Aggregate every step that ran; tell the monitor; mark the run finalized. True
        when this call, not a racing one, marked it. Aggregate ids are ``<run>.s<step>``,
        so two callers racing store each once."""
        with telemetry.span("aggregate", run.traceparent, run_id=run.id, pool=run.pool):
            results = self.store.results.of_run(run.id)
            timelines = self.timelines(run.id, results)
            aggregates = build_aggregates(
                run, steps, items, results, timelines, now_ms=self.now_ms()
            )
            for agg in aggregates:
                self._store_aggregate(agg)
        gate = None
        if self.monitor is not None:
            # Before the run is marked finalized: a crash here is retried by the timer,
            # and every write below is idempotent.
            with telemetry.span("detect", run.traceparent, run_id=run.id, pool=run.pool):
                gate = self.monitor.record(run, aggregates, results).gate
        flipped: list[bool] = []

        def mark(r: Run) -> bool | None:
            flipped[:] = [not r.finalized]
            if flipped[0]:  # the verdict of the call that finalizes it, kept with the run
                r.gate = gate
            # Still due: should the write finishing the run not follow (a crash), the timer
            # does it (the run is no longer read as finished-to-be otherwise).
            r.finalized, r.due_ms = True, self.now_ms()
            return None if flipped[0] else False

        self.update_run(run.id, mark)
        return flipped[0]

    def _store_aggregate(self, agg: Doc) -> None:
        """The per-second series can outgrow a document: it goes to Blob Storage."""
        series = agg.pop("series", None)
        if series:
            packed = pack_json(series)
            self.artifacts.put(agg["run_id"], agg["id"], "series", packed)
            agg["series_artifact"] = {"bytes": len(packed), "sha256": sha256_hex(packed)}
        self.store.results.create_aggregate(agg)

    def free_targets(self, run: Run) -> None:
        """Its I/O is over: the runs waiting for its targets may start, now."""
        self.admission.release(run)
        self.admit(run_keys(run))

    def admit(self, keys: list[str]) -> list[str]:
        started = []
        for waiting in self.admission.admit_next(keys):

            def admitted(r: Run) -> bool | None:
                if r.admitted or r.void:
                    return False
                r.admitted = True
                r.delivery.move(DeliveryState.PENDING)
                # Should the delivery below not happen (a crash), the timer sends it.
                r.due_ms = self.now_ms() + DELIVERY_BACKOFF_MS[-1]
                if not r.cancel_requested:  # cancelled meanwhile: it reads cancelled
                    r.move(RunState.QUEUED)
                return None

            run = self.update_run(waiting.id, admitted)
            if not run.admitted:  # void meanwhile: what it took is given back
                self.admission.release(run)
                continue
            self.admission.leave(run)
            self.deliver(run)
            started.append(run.id)
        return started

    # ---- reading results back -------------------------------------------------------------

    def timeline(self, run_id: str, item: str) -> ClientTimeline | None:
        try:
            return unpack_timeline(self.artifacts.get(run_id, item, "timeline"))
        except NotFound:
            log.warning("timeline of %s is missing from Blob Storage", item)
            return None

    def timelines(self, run_id: str, results: list[Doc]) -> dict[str, ClientTimeline]:
        out = {}
        for r in results:
            if "timeline" in (r.get("artifacts") or {}):
                t = self.timeline(run_id, r["item_id"])
                if t is not None:
                    out[r["item_id"]] = t
        return out

    def _step_aggregate(self, run: Run, number: int) -> Doc | None:
        steps, items = self.store.items.of_run(run.id)
        results = [r for r in self.store.results.of_run(run.id) if r["step"] == number]
        mine = [s for s in steps if s.step == number]
        aggs = build_aggregates(
            run,
            mine,
            [i for i in items if i.step == number],
            results,
            self.timelines(run.id, results),
            now_ms=self.now_ms(),
        )
        return aggs[0] if aggs else None


def failing(reason: str) -> Callable[[Item], bool | None]:
    return lambda d: None if d.end(ItemState.FAILED, reason) else False
