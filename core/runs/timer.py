"""The timer's tick, crash-only (pure logic over the lifecycle).

What is due: start barriers past their deadline, runs whose ``due_ms`` has come (a delivery
to retry, a finish left half-done by a crash, a step running longer than it should), free
targets with runs waiting. Each barrier, run and target is handled on its own: an error in
one is logged with its run id and the tick goes on with the others (issue 24.1: one run's
failing assert stopped every tick, for every run, for good).

An outage (``StoreUnavailable``) is retried at the next tick for as long as it lasts. Any
other error is a bug met by this run: counted on the run, retried at the next tick, and at
``INTERNAL_ERROR_ATTEMPTS`` the run fails alone, "internal error: ...", its items with it
(their agents are refused at their next heartbeat and stop), its targets freed.

A tick is complete when it went through everything due (whatever each one's outcome); the
service records the last complete tick in the store, where ``/api/health`` of every API
instance reads its age (``TickRepo``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from core import telemetry
from core.errors import StoreUnavailable
from core.models.state import FINISHED_RUN, INTERNAL_ERROR_ATTEMPTS, DeliveryState, RunState
from core.models.stored import Run, Step
from core.ports import Store, TickRepo
from core.runs.barrier import default_lead, ready_count, settle
from core.runs.lifecycle import Lifecycle, failing
from core.units import clients_text

log = logging.getLogger(__name__)
T = TypeVar("T")
R = TypeVar("R")

__all__ = [
    "INTERNAL_ERROR_ATTEMPTS",
    "TIMERS",
    "TickMark",
    "Timer",
    "advance_or_defer",
    "barrier_reason",
    "fail_barrier",
    "tick_check",
]
# The timers whose complete ticks are recorded (this one, and core.monitoring.scheduler's):
# what /api/health judges and the operator's bench.timer.last_tick_age reports.
TIMERS = ("runs", "schedules")
# A timer records its complete ticks at most this often (locally it ticks twice a second;
# in Azure once a minute): the age /api/health reports is this much coarser at worst.
TICK_RECORD_MS = 5_000


class TickMark:
    """Records a timer's complete ticks in the store, for every API instance's health."""

    def __init__(self, ticks: TickRepo, name: str) -> None:
        self.ticks = ticks
        self.name = name
        self.last_ms: int | None = None

    def done(self, now_ms: int) -> None:
        if self.last_ms is not None and now_ms - self.last_ms < TICK_RECORD_MS:
            return
        try:
            self.ticks.put(self.name, now_ms)
            self.last_ms = now_ms
        except StoreUnavailable as e:  # the tick itself went through
            log.warning("timer %s: its tick could not be recorded: %s", self.name, e)


def tick_check(last_ms: int | None, now_ms: int, stale_after_s: float, up_since_ms: int) -> str:
    """``/api/health``'s judgement of one timer: "ok", or why it is stale."""
    limit_ms = stale_after_s * 1000
    if last_ms is None:
        if now_ms - up_since_ms <= limit_ms:
            return "ok"  # just deployed: its first tick is yet to come
        return f"stale: no complete tick recorded (stale after {stale_after_s:g} s)"
    age_s = max(0, now_ms - last_ms) / 1000
    if age_s * 1000 <= limit_ms:
        return "ok"
    return f"stale: last complete tick {age_s:.0f} s ago (stale after {stale_after_s:g} s)"


def fail_barrier(life: Lifecycle, step: Step, reason: str) -> Step:
    """Fail a step at its barrier's deadline (the timer, or an agent's poll past it);
    counted once, by the call that wrote it (the operator's ``bench.barrier.failures``)."""
    wrote = [False]

    def fail(s: Step) -> bool | None:
        wrote[0] = s.fail(reason)
        return None if wrote[0] else False

    step = life.update_step(step.run_id, step.step, fail)
    if wrote[0]:
        telemetry.count("bench.barrier.failures")
    return step


def advance_or_defer(life: Lifecycle, run_id: str) -> None:
    """Advance a run after one of its items ended; should a backing service fail the
    advance (the aggregation reads Blob Storage), make the run due now so that the timer's
    next tick does it, instead of at the step's expected end plus a minute: the chaos test's
    run waited that long after its last result was stored during an Azurite restart. The
    item's change is written already, so the report that ended it succeeds."""
    try:
        life.advance(run_id)
    except StoreUnavailable as e:
        log.warning("run %s: not advanced yet (the timer does it): %s", run_id, e)
        now = life.now_ms()

        def due_now(r: Run) -> bool | None:
            if r.finished and r.state in FINISHED_RUN and r.finalized:
                return False
            if r.due_ms is not None and r.due_ms <= now:
                return False
            r.due_ms = now
            return None

        try:
            life.update_run(run_id, due_now)
        except StoreUnavailable:
            log.warning("run %s: could not be made due: at its due time, then", run_id)


def barrier_reason(store: Store, step: Step) -> str:
    """Why a step's barrier failed at its deadline: too few claimed, or too few ready."""
    _, items = store.items.of_run(step.run_id)
    claimed = sum(1 for i in items if i.step == step.step and i.held)
    deadline = step.deadline_ms or 0
    secs = (deadline - (step.first_claim_ms or deadline)) // 1000
    if claimed < step.clients:
        return f"{claimed} of {clients_text(step.clients)} claimed within {secs} s"
    ready = ready_count(store, step)
    return f"{ready} of {clients_text(step.clients)} were ready within {secs} s"


class Timer:
    def __init__(self, lifecycle: Lifecycle) -> None:
        self.life = lifecycle
        self.store = lifecycle.store
        self.mark = TickMark(lifecycle.store.ticks, "runs")

    def tick(self) -> list[str]:
        """Everything due, each on its own. Returns the runs finalized. Raises only when
        the lists of what is due cannot be read (the tick is then not complete)."""
        now = self.life.now_ms()
        for step in self.store.items.overdue_barriers(now):
            self._alone(step.run_id, f"step {step.step}'s barrier", self.expire_barrier, step)
        done: list[str] = []
        for run in self.store.runs.due(now):
            if self._alone(run.id, "its due work", self._due, run):
                done.append(run.id)
        for key in self.life.admission.stalled():
            # A run admitted here and then failing is due itself (its outbox).
            self._alone(None, f"admitting on {key}", self.life.admit, [key])
        self.mark.done(now)
        return done

    def _due(self, run: Run) -> bool:
        """Whatever core.runs.decide says for it (decide its creation, send a step, finish
        it). True when this finalized the run."""
        was = run.finalized
        return self.life.advance(run.id).finalized and not was

    def _alone(self, run_id: str | None, what: str, work: Callable[[T], R], arg: T) -> R | None:
        try:
            return work(arg)
        except StoreUnavailable as e:
            log.warning("run %s: %s: %s (again at the next tick)", run_id, what, e)
        except Exception as e:  # crash-only: one run never ends the tick
            log.exception("run %s: %s failed", run_id, what)
            if run_id is not None:
                self._internal_error(run_id, f"{what}: {type(e).__name__}: {e}")
        return None

    def _internal_error(self, run_id: str, reason: str) -> None:
        """Count the failure on the run; at the bound, fail the run."""
        try:

            def count(r: Run) -> bool | None:
                if r.finished and r.state in FINISHED_RUN:
                    return False  # settled meanwhile: nothing to give up on
                r.internal_errors = min(r.internal_errors + 1, INTERNAL_ERROR_ATTEMPTS)
                return None

            run = self.life.update_run(run_id, count)
            if run.gave_up and not (run.finished and run.state in FINISHED_RUN):
                self.fail(run_id, f"internal error: {reason}"[:1000])
        except Exception:  # logged; the next tick tries again
            log.exception("run %s: could not record its internal error", run_id)

    def fail(self, run_id: str, reason: str) -> Run:
        """Fail a run the timer gives up on: every item not ended fails with the reason
        (their agents are refused at their next heartbeat and stop), then the run, then its
        targets go to the runs waiting for them."""
        try:
            _, items = self.store.items.of_run(run_id)
        except StoreUnavailable:
            raise
        except Exception:  # items that cannot be read cannot run either
            log.exception("run %s: its items could not be read to fail them", run_id)
            items = []
        for item in items:
            if not item.ended:
                try:
                    self.life.update_item(run_id, item.id, failing(reason))
                except StoreUnavailable:
                    raise
                except Exception:
                    log.exception("run %s: item %s could not be failed", run_id, item.id)

        def give_up(r: Run) -> bool | None:
            if r.finished and r.state in FINISHED_RUN:
                return False
            r.internal_errors = max(r.internal_errors, INTERNAL_ERROR_ATTEMPTS)
            if r.state not in FINISHED_RUN:  # a cancelled run stays cancelled
                r.move(RunState.FAILED)
            r.error, r.finished, r.due_ms, r.provisioning = reason, True, None, None
            if r.delivery.state == DeliveryState.PENDING:
                r.delivery.move(DeliveryState.FAILED)
            return None

        run = self.life.update_run(run_id, give_up)
        log.error("run %s failed: %s", run_id, reason)
        if not run.admitted:
            self.life.admission.leave(run)
        self.life.free_targets(run)
        return run

    # ---- the start barrier's deadline ----------------------------------------------------

    def expire_barrier(self, step: Step) -> Step:
        """The step's clients did not all claim and get ready in time: the step fails with
        the count, and the run moves on (``advance`` fails its items with it). A step that
        got its start instant just before is returned as it is. A deadline with no claim
        (left by ``Step.reopen`` before issue 24.1) is cleared: that barrier has not begun."""
        if step.first_claim_ms is None:

            def clear(s: Step) -> bool | None:
                if s.first_claim_ms is not None or s.deadline_ms is None:
                    return False
                s.deadline_ms = None
                return None

            return self.life.update_step(step.run_id, step.step, clear)
        step = settle(self.life, step, default_lead)  # every client ready, unrecorded (a crash)
        if step.start_at_ms is not None:
            return step
        step = fail_barrier(self.life, step, barrier_reason(self.store, step))
        if step.start_at_ms is None:
            self.life.advance(step.run_id)
        return step
