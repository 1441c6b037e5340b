"""What happens next to a run (pure): ``decide`` reads the run, its steps and its items and
names one action; ``core.runs.lifecycle.Lifecycle.advance`` executes it and asks again
with what it wrote, until the answer is to stop (``Wait``, ``Judge(False)``, ``Settle``).

The table, first match wins (``tests/test_decide.py`` holds a case for each row):

=====  ==========================================================  ===================
 row    the run, its steps and its items                            action
=====  ==========================================================  ===================
 1      an item of a failed step has not ended                      FailItems
 2      waiting in line, its creation undecided, not cancelled      Judge or Wait
 3      admitted, its first step not sent, cancelled                CloseOutbox
 4      admitted, its first step not sent, creation undecided       Judge or Wait
 5      admitted, its first step not sent                           Send(0)
 6      a step not sent, the ones before it ended, nothing failed,
        not cancelled, its first step sent                          Send(n)
 7      finished, owes its aggregates, not finalized yet            Finalize
 8      anything else                                               Settle
=====  ==========================================================  ===================

"Finished": no item will run any more (its delivery failed; or every item ended and no
step is left, a step or a metadata phase failed, or it was cancelled). "Owes": a finished
run that was admitted, delivered, not cancelled, not given up on and not void stores its
aggregates and tells the monitor once (``Finalize``). ``Settle`` writes the state the run
derives (``core.models.stored.derive_run_state``) with ``settling``, a change decided again
on the fresh document inside the compare-and-swap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.models.state import FINISHED_RUN, DeliveryState, ItemState, RunState
from core.models.stored import Item, Run, Step, derive_run_state
from core.runs.commit import verdict
from core.runs.metadata import ends_later_phases

RECHECK_MS = 30_000  # a run found still running is looked at again this much later


@dataclass(frozen=True)
class FailItems:
    """The items of a failed step that have not ended fail with it, saying why: the one
    place an item is failed for its step (an agent's call ends only its own)."""

    items: tuple[tuple[str, str], ...]  # (item id, its step's reason)


@dataclass(frozen=True)
class Wait:
    """Nothing to do now: its creator may still void it (core.runs.commit); the timer
    looks again."""


@dataclass(frozen=True)
class Judge:
    """Decide its creation (core.runs.commit): accepted (True) or void (False)."""

    accept: bool


@dataclass(frozen=True)
class CloseOutbox:
    """Cancelled before its first step went out: nothing will be sent."""


@dataclass(frozen=True)
class Send:
    """Send this step (core.runs.delivery: the same mechanism for every step)."""

    step: int


@dataclass(frozen=True)
class Finalize:
    """Store the aggregates of every step that ran, tell the monitor, mark it finalized."""


@dataclass(frozen=True)
class Settle:
    """Write the state the run derives; free its targets once it is finished."""

    finished: bool
    owes: bool  # it owes its aggregates (finalized by now, unless a crash intervened)
    delivery_failed: bool
    reasons: tuple[str, ...]  # its failed steps' reasons, then its failed items'


Action = FailItems | Wait | Judge | CloseOutbox | Send | Finalize | Settle


def decide(
    run: Run, steps: list[Step], items: list[Item], now_ms: int, *, creator: bool = False
) -> Action:
    """The next action for this run, as read (see the module's table). ``creator``: the
    call of the intake that stored the run and saw it stored in time (it accepts it)."""
    failing = _to_fail(steps, items)
    if failing:
        return FailItems(failing)
    undecided = run.accepted is None and not run.cancel_requested
    if not run.admitted and undecided:
        return _judge(run, now_ms, creator)
    if run.admitted and run.delivery.state == DeliveryState.PENDING:
        if run.cancel_requested:
            return CloseOutbox()
        if run.accepted is not True:
            return _judge(run, now_ms, creator)
        if _stopped(run, steps, items):  # a step failed before the first went out
            return _settle(run, steps, items)
        return Send(0)
    number = _sendable(run, steps, items)
    if number is not None:
        return Send(number)
    return _settle(run, steps, items)


def _to_fail(steps: list[Step], items: list[Item]) -> tuple[tuple[str, str], ...]:
    why = {s.step: s.failed_reason for s in steps if s.failed_reason}
    return tuple((i.id, why[i.step]) for i in items if i.step in why and not i.ended)


def _judge(run: Run, now_ms: int, creator: bool) -> Judge | Wait:
    decided = True if creator else verdict(run, now_ms)
    return Wait() if decided is None else Judge(decided)


def _next_step(steps: list[Step]) -> Step | None:
    return next((s for s in sorted(steps, key=lambda s: s.step) if not s.enqueued), None)


def _stopped(run: Run, steps: list[Step], items: list[Item]) -> bool:
    """No further step may be sent: a step or a metadata phase failed, or it was cancelled."""
    failed_step = any(s.failed_reason for s in steps)
    return failed_step or ends_later_phases(run.workload, items) or run.cancel_requested


def _sendable(run: Run, steps: list[Step], items: list[Item]) -> int | None:
    """The next step, once the steps before it have ended. Its own items may exist already:
    a send that failed half-way (some messages out, not marked sent) is sent again, in full."""
    step = _next_step(steps)
    if step is None or not run.admitted or run.delivery.state != DeliveryState.SENT:
        return None
    if run.accepted is not True:  # never sent a step, whatever else its documents say
        return None
    if _stopped(run, steps, items) or not all(i.ended for i in items if i.step != step.step):
        return None
    return step.step


def _settle(run: Run, steps: list[Step], items: list[Item]) -> Finalize | Settle:
    delivery_failed = run.delivery.state == DeliveryState.FAILED
    last = _next_step(steps) is None or _stopped(run, steps, items)
    finished = delivery_failed or (all(i.ended for i in items) and last)
    owes = finished and _owes(run)
    if owes and not run.finalized:
        return Finalize()
    reasons = [s.failed_reason for s in steps if s.failed_reason]
    reasons += [i.reason for i in items if i.state == ItemState.FAILED and i.reason]
    return Settle(finished, owes, delivery_failed, tuple(reasons))


def _owes(run: Run) -> bool:
    """A finished run owes its aggregates unless it never ran as asked: not admitted, its
    delivery failed, cancelled, given up on (an internal error) or void."""
    if not run.admitted or run.delivery.state == DeliveryState.FAILED:
        return False
    return not (run.cancel_requested or run.gave_up or run.void)


def settling(action: Settle, items: list[Item], now_ms: int) -> Callable[[Run], bool | None]:
    """The compare-and-swap change that writes a settled run (decided on the fresh copy)."""

    def apply(r: Run) -> bool | None:
        if r.finished and r.state in FINISHED_RUN and (r.finalized or not action.owes):
            return False  # settled (a run the timer failed included): nothing to redo
        if not action.finished and (r.finished or r.finalized):
            # Items read before the last one ended, written after a call that saw it:
            # this call knows less than the one that finished the run.
            return False
        r.finished = action.finished
        r.provisioning = None  # its steps are sent: nothing is held
        derived = derive_run_state(
            items,
            cancel_requested=r.cancel_requested,
            finalized=r.finalized,
            finished=action.finished,
            admitted=r.admitted,
        )
        r.move(RunState.FAILED if action.delivery_failed else derived)
        if not action.delivery_failed:
            r.error = action.reasons[0] if action.reasons else None
        _due(r, action, now_ms)
        return None

    return apply


def _due(r: Run, action: Settle, now_ms: int) -> None:
    if action.finished:
        r.due_ms = now_ms if action.owes and not r.finalized else None
    elif r.due_ms is not None and r.due_ms <= now_ms:
        r.due_ms = now_ms + RECHECK_MS  # still running: look again later
