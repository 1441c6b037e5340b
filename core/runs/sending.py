"""One sender per step (pure logic; ``marking_sent`` waits between its tries):
``core.runs.lifecycle.enqueue_step`` takes the step's send lease, creates its item
documents and hands their messages to the queue.

Every caller that advances a run may find a step to send: the intake, an agent's claim,
the timer, another API instance. Before issue 29 each of them sent it again while the
first was still sending (5.2 sends per item at 64 clients, the items created again with
409s); now the first takes the lease (``Step.sending_ms``) and the others leave it,
unless it has held it for its lease, ``send_lease_ms`` (it died: the timer sends the step
again).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from core.errors import PartialSend, StoreUnavailable
from core.models import WorkItem
from core.models.stored import Step

# A step's sender holds it this long, and SEND_LEASE_PER_CLIENT_MS more per item: 100
# items took 9-14 s to create and send on the loaded local stack (docs/local-stack.md), so
# a thousand can outlast 30 s, and a lease that lapses mid-send has the timer send the
# whole step again beside it.
SEND_LEASE_MS = 30_000
SEND_LEASE_PER_CLIENT_MS = 100


def send_lease_ms(clients: int) -> int:
    """How long a sender of a step of ``clients`` items holds it."""
    return SEND_LEASE_MS + SEND_LEASE_PER_CLIENT_MS * clients


class SendInProgress(Exception):
    """Another caller is sending this step's items."""


def taking_send(now_ms: int, taken: list[bool]) -> Callable[[Step], bool | None]:
    """The change that makes its caller the step's sender: ``taken`` says whether it did
    (not when the step was sent, or another sender began less than its lease ago)."""

    def take(s: Step) -> bool | None:
        busy = s.sending_ms is not None and now_ms - s.sending_ms < send_lease_ms(s.clients)
        taken[:] = [not s.enqueued and not busy]
        if not taken[0]:
            return False
        s.sending_ms = now_ms
        return None

    return take


def giving_up_send(
    began_ms: int, error: Exception, work: Sequence[WorkItem]
) -> Callable[[Step], bool | None]:
    """The change a sender that could not reach the store or the queue writes: its lease
    (begun at ``began_ms``) is given back, unless another sender took it since, with the
    clients it did not send to (``not_sent``; None: those the step had kept)."""
    unsent = not_sent(error, work)

    def give_up(s: Step) -> bool | None:
        if s.sending_ms != began_ms:
            return False
        s.sending_ms = None
        if unsent is not None:
            s.unsent = unsent
        return None

    return give_up


def still_to_send(unsent: list[int] | None, work: Sequence[WorkItem]) -> list[WorkItem]:
    """The items a sender sends: every one, or those an earlier sender did not get out
    (issue 29: a single send that timed out sent all 1,000 again)."""
    if unsent is None:
        return list(work)
    left = set(unsent)
    return [w for w in work if w.client in left]


def not_sent(error: Exception, work: Sequence[WorkItem]) -> list[int] | None:
    """The clients a failed send left out: those PartialSend names; None when the error
    says nothing of which went (the step's record stays as it was)."""
    if not isinstance(error, PartialSend):
        return None
    failed = set(error.unsent)
    return [w.client for w in work if w.item_id in failed]


# A sender whose step is out marks it sent, through MARK_SENT_TRIES compare-and-swaps of
# core.runs.cas each, MARK_SENT_PAUSE_S apart (issue 29.2: the mark lost the race to the
# step's claims, the lease lapsed and the timer sent all 1,000 items again, twice).
MARK_SENT_TRIES = 5
MARK_SENT_PAUSE_S = 0.2


def marking_sent(mark: Callable[[], object], sleep: Callable[[float], None] = time.sleep) -> None:
    """Run ``mark`` (the step's "sent" write) until it is stored: a store busy or contended
    for a moment does not turn a complete send into a resend."""
    for attempt in range(MARK_SENT_TRIES):
        try:
            mark()
            return
        except StoreUnavailable:  # Contended among them
            if attempt == MARK_SENT_TRIES - 1:
                raise
            sleep(MARK_SENT_PAUSE_S * (attempt + 1))
