"""Sending a run's steps (pure: the changes ``core.runs.lifecycle`` writes on the run).

Every step goes out the same way (issue 28.3). ``Lifecycle.advance`` sends it (its items
created, then one message each); if the queue cannot be reached, the attempt is counted on
the run's outbox record (``run.delivery``: attempts, last error, deadline) and the timer
sends it again with backoff (DELIVERY_BACKOFF_MS) until DELIVERY_DEADLINE_MS after the
first failed attempt. Then the step fails, saying why ("the queue service could not be
reached for 10 min: ..."), its items with it, and the run fails with that reason, freeing
its targets: a dead queue never leaves a run hanging, and never silently. A step sent
clears the record, so the next step's failures have a deadline of their own.

The first step also moves the outbox's state (``core.models.state.DELIVERY_MOVES``): pending
once the run is admitted, sent, or failed at the deadline; nothing is sent before the run's
creation is accepted (core.runs.commit).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.models.state import FINISHED_RUN, DeliveryState, RunState
from core.models.stored import Run

DELIVERY_DEADLINE_MS = 10 * 60_000  # after this long without reaching the queue, fail
DELIVERY_BACKOFF_MS = (1_000, 2_000, 5_000, 10_000, 30_000)

Change = Callable[[Run], bool | None]


@dataclass
class Outcome:
    """What a change decided on the fresh document: whether it gave up on the step."""

    gave_up: bool = False


def backoff_ms(attempts: int) -> int:
    """The wait before the next attempt, after ``attempts`` failed ones (at least one)."""
    return DELIVERY_BACKOFF_MS[min(max(attempts, 1), len(DELIVERY_BACKOFF_MS)) - 1]


def unreachable_reason(last_error: str | None) -> str:
    return (
        f"the queue service could not be reached for "
        f"{DELIVERY_DEADLINE_MS // 60_000} min: {last_error}"
    )


def unreachable(step: int, error: str, now_ms: int, outcome: Outcome) -> Change:
    """The queue could not be reached for ``step``: count the attempt and retry after a
    backoff, or give up at the deadline (``outcome.gave_up``: the caller fails the step)."""

    def change(r: Run) -> bool | None:
        d = r.delivery
        outcome.gave_up = False
        if step == 0 and d.state != DeliveryState.PENDING:
            return False  # a racing call sent it, or gave up on it
        if step > 0 and (d.state != DeliveryState.SENT or r.state in FINISHED_RUN):
            return False  # the run ended meanwhile: nothing to retry
        ongoing = d.last_error is not None  # a series of failed attempts for this step
        d.attempts = d.attempts + 1 if ongoing else 1
        if not ongoing or d.deadline_ms is None:
            d.deadline_ms = now_ms + DELIVERY_DEADLINE_MS
        d.last_error = error
        if now_ms < d.deadline_ms:
            r.due_ms = now_ms + backoff_ms(d.attempts)
            return None
        outcome.gave_up = True
        r.error = unreachable_reason(d.last_error)
        if step == 0:
            d.move(DeliveryState.FAILED)
        r.due_ms = now_ms  # finish it (and free its targets) at once
        return None

    return change


def sent(step: int, due_ms: int | None) -> Change:
    """``step`` is on the queue: the outbox record is cleared and the run is due when the
    step should have ended (``due_ms``; None: it was sent before, the due time stands)."""

    def change(r: Run) -> bool | None:
        d = r.delivery
        if step == 0:
            if d.state == DeliveryState.FAILED:
                return False  # a racing call gave up at the deadline: the run has failed
            d.move(DeliveryState.SENT)
            if r.provisioning is not None:
                r.provisioning = None
                if r.state == RunState.PROVISIONING:
                    r.move(RunState.QUEUED)
        d.last_error = None
        if due_ms is not None:
            r.due_ms = due_ms
        return None

    return change


def waiting_for_sender(lapses_ms: int | None, now_ms: int) -> Change:
    """Another caller is sending the step: a run due now is due again when that sender's
    lease would lapse (it renews it as it goes), not at every tick of the timer, each of
    which reads the whole run (a 1,000-item send lasts minutes on a slow queue). None: it
    was sent meanwhile."""

    def change(r: Run) -> bool | None:
        if lapses_ms is None or r.due_ms is None or r.due_ms > now_ms or r.due_ms >= lapses_ms:
            return False
        r.due_ms = lapses_ms
        return None

    return change


def close_outbox(r: Run) -> None:
    """Cancelled before its first step went out: nothing to send."""
    if r.delivery.state == DeliveryState.PENDING:  # unless a racing call settled it
        r.delivery.move(DeliveryState.SENT)
    r.provisioning = None
