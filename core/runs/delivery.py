"""A run's outbox (pure logic over the lifecycle): its first step is sent once the run is
admitted; if the queue cannot be reached the delivery stays pending and the timer sends it,
with backoff, until DELIVERY_DEADLINE_MS (then the run fails). The delivery moves along
``core.runs.state.DELIVERY_MOVES``; later steps are sent by ``Lifecycle.advance``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from core.errors import StoreUnavailable
from core.models.state import DeliveryState, RunState
from core.models.stored import Run
from core.runs.commit import accept, verdict, void
from core.runs.provisioning import AwaitingAgents, hold

if TYPE_CHECKING:
    from core.runs.lifecycle import Lifecycle

log = logging.getLogger(__name__)
DELIVERY_DEADLINE_MS = 10 * 60_000  # after this long without reaching the queue, fail
DELIVERY_BACKOFF_MS = (1_000, 2_000, 5_000, 10_000, 30_000)


def deliver(life: Lifecycle, run: Run, *, creator: bool = False) -> Run:
    """Send an admitted run's first step. If the queue cannot be reached the run stays
    queued with its delivery pending, and the timer tries again, until the deadline.

    Nothing is sent for a run whose creation does not count (core.runs.commit): the run
    is accepted first, by its ``creator`` (which saw it stored in time and answers 202),
    or by anyone once its creation can be judged from the document alone."""
    if run.cancel_requested:  # cancelled before its first step went out: nothing to send
        return _nothing_to_send(life, run)
    now = life.now_ms()
    if run.accepted is not True:
        decided = True if creator else verdict(run, now)
        if decided is None:
            return run  # its creator may still void it: the timer looks again
        run = accept(life, run) if decided else void(life, run.id, read=run)
        if run.accepted is not True:
            return run
    try:
        life.enqueue_step(run, 0)
    except AwaitingAgents as e:
        if run.cancel_requested:  # cancelled while its pool grew: nothing to send
            return _nothing_to_send(life, run)
        run = hold(life, run, 0, e.waiting)
        return life.advance(run.id) if run.delivery.state == DeliveryState.FAILED else run
    except StoreUnavailable as e:
        log.warning("run %s: first step not sent yet: %s", run.id, e)
        error = str(e)[:500]

        def pending(r: Run) -> bool | None:
            d = r.delivery
            if d.state != DeliveryState.PENDING:
                return False  # a racing call sent it, or gave up on it
            d.attempts, d.last_error = d.attempts + 1, error
            d.deadline_ms = d.deadline_ms or now + DELIVERY_DEADLINE_MS
            if now >= d.deadline_ms:
                d.move(DeliveryState.FAILED)
                r.error = (
                    f"the queue service could not be reached for "
                    f"{DELIVERY_DEADLINE_MS // 60_000} min: {d.last_error}"
                )
                r.due_ms = now  # finish it (and free its targets) at once
            else:
                backoff = DELIVERY_BACKOFF_MS[min(d.attempts, len(DELIVERY_BACKOFF_MS)) - 1]
                r.due_ms = now + backoff
            return None

        run = life.update_run(run.id, pending)
        return life.advance(run.id) if run.delivery.state == DeliveryState.FAILED else run

    def sent(r: Run) -> bool | None:
        if r.delivery.state == DeliveryState.FAILED:
            return False  # a racing call gave up at the deadline: the run has failed
        r.delivery.move(DeliveryState.SENT)
        r.delivery.last_error = None
        if r.provisioning is not None:
            r.provisioning = None
            if r.state == RunState.PROVISIONING:
                r.move(RunState.QUEUED)
        return None

    return life.update_run(run.id, sent)


def _nothing_to_send(life: Lifecycle, run: Run) -> Run:
    def nothing(r: Run) -> None:
        if r.delivery.state == DeliveryState.PENDING:  # unless a racing call settled it
            r.delivery.move(DeliveryState.SENT)
        r.provisioning = None

    life.update_run(run.id, nothing)
    return life.advance(run.id)
