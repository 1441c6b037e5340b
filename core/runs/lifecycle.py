"""Advancing runs: the one place where a run moves on (over the repositories).

An agent's report changes only its own item and step (core.runs.protocol); when an item
ends, ``advance`` is called for its run, and the timer calls it for the runs that are due.
What happens next is decided by a pure function of the run, its steps and its items
(``core.runs.decide``: the table of cases); ``advance`` executes each action it names and
asks again: fail a failed step's items, decide the run's creation, send a step (every step
the same way: core.runs.delivery), hold it while the pool grows (core.runs.provisioning),
store the aggregates and tell the monitor once every step has run, and settle the run's
state, freeing its targets and admitting the runs waiting for them once it is finished.

The timer never scans: it reads the runs whose ``due_ms`` has come (a send to retry, a
finish left half-done by a crash, a step running longer than it should) and the step
barriers past their deadline (failing the step; ``advance`` fails its items), and starts
waiting runs a crash left behind. A run that is simply running is not read until its step
should have ended. The timer's tick, crash-only: core.runs.timer.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from core.errors import Conflict, StoreUnavailable
from core.fleet.scaling import Waiting
from core.models import Result
from core.models.ids import step_id
from core.models.state import TERMINAL, DeliveryState, ItemState, RunState
from core.models.stored import Item, Run, Step
from core.ports import Artifacts, Queue, Store
from core.runs import finalize, sending
from core.runs.admission import Admission, run_keys
from core.runs.cas import update
from core.runs.commit import accepting, voiding
from core.runs.decide import (
    Action,
    CloseOutbox,
    FailItems,
    Finalize,
    Judge,
    Send,
    Settle,
    Wait,
    decide,
    settling,
)
from core.runs.delivery import (
    DELIVERY_BACKOFF_MS,
    Outcome,
    close_outbox,
    sent,
    unreachable,
    waiting_for_sender,
)
from core.runs.finalizing import finalize_lease
from core.runs.plan import plan_items, resolve_dynamic
from core.runs.provisioning import AwaitingAgents, holding
from core.runs.recorder import RunRecorder
from core.runs.sender import StepSender
from core.runs.sending import SendInProgress
from core.timeline import ClientTimeline
from core.timestamps import iso_ms

log = logging.getLogger(__name__)
STEP_SLACK_MS = 60_000  # a step's expected length plus this, then the timer looks
MAX_ACTIONS = 16  # one advance takes a handful; more is a bug, failed by the timer


@dataclass
class _Seen:
    """What ``advance`` knows of the run: as read, then as each action wrote it."""

    run: Run
    steps: list[Step]
    items: list[Item]
    announce: bool = False  # this call finalized the run: it tells ``on_finished``


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
        on_finished: Callable[[Run], object] | None = None,
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
        trusted: bool = False,
    ) -> Item:
        """``read``: the item as just read, tried first (cas.update's ``first``, ``trusted``)."""
        get, put, stamp = self.store.items.get_item, self.store.items.replace_item, self._stamp_item
        return update(
            lambda: get(run_id, item), put, change, item, stamp=stamp, first=read, trusted=trusted
        )

    def update_step(
        self,
        run_id: str,
        step: int,
        change: Callable[[Step], bool | None],
        read: Step | None = None,
    ) -> Step:
        """``read``: the step as just read, tried first (core.runs.cas.update's ``first``)."""
        get, put = self.store.items.get_step, self.store.items.replace_step
        return update(lambda: get(run_id, step), put, change, step_id(run_id, step), first=read)

    def fail_step(self, run_id: str, step: int, reason: str) -> Step:
        return self.update_step(run_id, step, lambda s: None if s.fail(reason) else False)

    # ---- advancing ----------------------------------------------------------------------

    def advance(self, run_id: str) -> Run:
        """Execute what ``core.runs.decide`` says, again and again, until it says stop:
        send the run's next step once the previous one has ended; finish it (aggregates,
        monitor, targets freed, waiting runs admitted) once no item will run any more."""
        return self._advance(run_id)

    def deliver(self, run: Run, *, creator: bool = False) -> Run:
        """Advance a run just admitted or stored, from the document in hand: its first step
        goes out. ``creator``: the intake that saw it stored in time accepts it."""
        return self._advance(run.id, read=run, creator=creator)

    def _advance(self, run_id: str, *, read: Run | None = None, creator: bool = False) -> Run:
        run = read if read is not None else self.store.runs.get(run_id)
        seen = _Seen(run, *self.store.items.of_run(run_id))
        taken: list[str] = []
        for _ in range(MAX_ACTIONS):
            action = decide(seen.run, seen.steps, seen.items, self.now_ms(), creator=creator)
            taken.append(type(action).__name__)
            done = self._execute(action, seen)
            if done is not None:
                return done
        raise RuntimeError(f"run {run_id}: no end to its actions: {', '.join(taken)}")

    def _execute(self, action: Action, seen: _Seen) -> Run | None:
        """Do one action: the run to return when it is the last, else None (ask again)."""
        run = seen.run
        match action:
            case FailItems(items=to_fail):
                ended = {i: self.update_item(run.id, i, failing(why)) for i, why in to_fail}
                seen.items = [ended.get(i.id, i) for i in seen.items]
            case Wait():
                return run
            case Judge(accept=True):
                seen.run = self.accept(run)
                return None if seen.run.accepted else seen.run
            case Judge():
                return self.void(run.id, run.generation, read=run)
            case CloseOutbox():
                self.update_run(run.id, close_outbox)
                self._reread(seen)
            case Send(step=number):
                return self._send(seen, number)
            case Finalize():
                with finalize_lease(partial(self.update_run, run.id), self.now_ms()) as held:
                    if held is None:
                        return run  # another caller finalizes it
                    seen.announce, seen.run = self._finalize(held, seen.steps, seen.items)
            case Settle():
                return self._settle(seen, action)
        return None

    def _reread(self, seen: _Seen) -> None:
        seen.run = self.store.runs.get(seen.run.id)
        seen.steps, seen.items = self.store.items.of_run(seen.run.id)

    def _send(self, seen: _Seen, number: int) -> Run | None:
        """Send a step (core.runs.delivery); on a dead queue, retry later or give up."""
        run, now = seen.run, self.now_ms()
        outcome = Outcome()
        try:
            due = self.enqueue_step(run, number)
        except SendInProgress as e:  # its sender advances the run once the step is out
            with contextlib.suppress(StoreUnavailable, Conflict):  # due when its lease lapses
                return self.update_run(run.id, waiting_for_sender(e.lapses_ms, now), read=run)
            return run
        except AwaitingAgents as e:
            run = self.update_run(run.id, holding(number, e.waiting, now, outcome))
            why = run.error or "its pool did not grow"
        except StoreUnavailable as e:
            log.warning("run %s: step %d not sent yet: %s", run.id, number, e)
            run = self.update_run(run.id, unreachable(number, str(e)[:500], now, outcome))
            why = run.error or str(e)
        else:
            # From the run in hand (a stale copy fails its swap and is read again), and the
            # run as written is the one to go on with: two reads fewer on a POST's way to
            # its answer (issue 29.3). Nothing written: the run as read afresh (cas.update).
            seen.run = self.update_run(run.id, sent(number, due), read=run)
            seen.steps, seen.items = self.store.items.of_run(run.id)
            return None
        if not outcome.gave_up:
            return run  # held, or to be sent again: the timer looks at it when it is due
        self.fail_step(run.id, number, why)  # its items fail with it, and the run
        self._reread(seen)
        return None

    def _settle(self, seen: _Seen, action: Settle) -> Run:
        was_finished = seen.run.finished
        run = self.update_run(seen.run.id, settling(action, seen.items, self.now_ms()))
        if run.finished and not was_finished and run.admitted:
            self.free_targets(run)
        if seen.announce and self.on_finished is not None:
            self.on_finished(run)  # once, by whoever finalized it, with its final state
        return run

    # ---- sending steps ------------------------------------------------------------------

    def enqueue_step(self, run: Run, number: int) -> int | None:
        """Resolve, create and send a step's items, then mark the step enqueued; when the
        run is due next (None: sent before, or failed as it could not be sized). One caller
        sends, renewing its lease (core.runs.sender; SendInProgress for the others)."""
        step = self.store.items.get_step(run.id, number)
        if step.enqueued:
            return None
        short = self.pool_shortfall
        waiting = short(run, step.clients) if short is not None else None
        if waiting is not None:
            raise AwaitingAgents(waiting)
        if step.workload is None:  # a rate-curve or target_iops step
            resolved = self._resolve(run, step)
            if resolved is None:
                return None
            step = resolved
        assert step.workload is not None
        taken: list[bool] = []
        began = self.now_ms()
        taking = self.update_step(run.id, number, sending.taking_send(began, taken), read=step)
        if not taken[0]:  # another caller is sending it: it marks it sent
            raise SendInProgress(number, sending.lapses_ms(taking))
        work = plan_items(run, step, step.workload)  # one per client
        sender = StepSender(
            number, began, lambda change: self.update_step(run.id, number, change), self.now_ms
        )
        try:
            sender.run(run, work, taking.unsent, self.store.items.create_items, self.queue.send_all)
        except StoreUnavailable:
            # The outbox's retry (DELIVERY_BACKOFF_MS) need not wait out this lease.
            with contextlib.suppress(StoreUnavailable, Conflict):
                give_up = sending.giving_up_send(sender.held_ms, sender.left)
                self.update_step(run.id, number, give_up)
            raise
        # Its messages are out: a mark lost to a race would send them all again.
        sending.marking_sent(lambda: self.update_step(run.id, number, lambda s: s.mark_sent()))
        w0, wait_s = step.workload, run.request.barrier_timeout_s + run.cooldown_s
        return self.now_ms() + (wait_s + w0.ramp_time + w0.runtime) * 1000 + STEP_SLACK_MS

    def _resolve(self, run: Run, step: Step) -> Step | None:
        """Size a dynamic step from the aggregate of the step it refers to; a step that
        cannot be sized fails (None)."""
        assert step.ref_step is not None
        ref = finalize.step_aggregate(self.store, self.artifacts, run, step.ref_step, self.now_ms())
        if ref is None:
            self.fail_step(
                run.id, step.step, f"step {step.ref_step} gave no result to size this step from"
            )
            return None
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

        return self.update_step(run.id, step.step, resolve)

    # ---- finishing ----------------------------------------------------------------------

    def _finalize(self, run: Run, steps: list[Step], items: list[Item]) -> tuple[bool, Run]:
        """Aggregate every step that ran; tell the monitor; mark the run finalized. True
        when this call, not a racing one, marked it."""
        gate = finalize.aggregate_and_judge(
            self.store, self.artifacts, self.monitor, run, steps, items, self.now_ms()
        )
        flipped: list[bool] = []

        def mark(r: Run) -> bool | None:
            flipped[:] = [not r.finalized]
            if flipped[0]:  # the verdict of the call that finalizes it, kept with the run
                r.gate = gate
            # Still due: should the write finishing the run not follow (a crash), the timer
            # does it (the run is no longer read as finished-to-be otherwise).
            r.finalized, r.due_ms = True, self.now_ms()
            return None if flipped[0] else False

        marked = self.update_run(run.id, mark)
        return flipped[0], marked

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

    # ---- the commit point (core.runs.commit) ----------------------------------------------

    def accept(self, run: Run) -> Run:
        """Record that the run counts, before its first step is sent (returned void if so)."""
        return self.update_run(run.id, accepting, read=run)

    def void(self, run_id: str, generation: int, read: Run | None = None) -> Run:
        """Fail attempt ``generation`` of a run, whose creation does not count, unless it
        was accepted or revived meanwhile; free what it took (target locks, places in line)."""
        run = self.update_run(run_id, voiding(generation), read=read)
        if run.accepted is False:
            self.admission.leave(run)
            self.free_targets(run)
        return run

    # ---- reading results back -------------------------------------------------------------

    def timeline_of(self, result: Result) -> ClientTimeline | None:
        return finalize.timeline_of(self.artifacts, result)

    def timelines(self, run_id: str, results: Sequence[Result]) -> dict[str, ClientTimeline]:
        return finalize.timelines(self.artifacts, run_id, results)


def failing(reason: str) -> Callable[[Item], bool | None]:
    return lambda d: None if d.end(ItemState.FAILED, reason) else False
