"""One sender per step (pure logic; ``marking_sent`` waits between its tries):
``core.runs.lifecycle.enqueue_step`` takes the step's send lease and core.runs.sender
creates its item documents and hands their messages to the queue, renewing the lease.

Every caller that advances a run may find a step to send: the intake, an agent's claim,
the timer, another API instance. Before issue 29 each of them sent it again while the
first was still sending (5.2 sends per item at 64 clients, the items created again with
409s); now the first takes the lease (``Step.sending_ms``) and the others leave it until
``SEND_LEASE_MS`` after its last renewal (it died: the timer sends what it had not sent).

The sender renews the lease as it goes (``renewing``), at least every ``RENEW_EVERY_MS``
between chunks of messages sized to take about that long at the rate the queue is going
(``next_chunk``), and each renewal records the clients it has not sent yet (``Step.unsent``):
a live sender keeps the step however slow the queue (Azurite sent 3-8 messages a second
under load and a 1,000-item send outlasted a fixed lease: the timer sent the whole step
again beside it, 5.7 sends per item), and the sender that takes over a dead one's lease
sends only what it had not recorded as sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar

from core.errors import StoreUnavailable
from core.models import WorkItem
from core.models.stored import Step

# A sender holds its step this long after its last renewal: a dead sender's step is taken
# over this long after it died, at most RENEW_EVERY_MS plus a chunk's send more.
SEND_LEASE_MS = 30_000
# A sender renews its lease (and records its progress) once this long has passed since
# its last renewal, after the chunk of messages it is sending; each chunk is sized to take
# about this long at the rate of the one before, so that a queue slowing down five-fold
# from one chunk to the next still leaves the lease held.
RENEW_EVERY_MS = 5_000
# The first chunk, before any rate is known: small enough that a queue sending one message
# a second still leaves the lease held (the chunks after it are sized by the rate, and go
# out adapters/queue.py SEND_CONCURRENCY at a time).
FIRST_CHUNK = 8
# At most this many between two looks at the lease: each look waits for its chunk's slowest
# send, 0.5-2 s with no send going out when the clients' claims hold the CPU (issue 29.2:
# 1,000 items in chunks of 256, 4-7 s of gaps before the last send; of 512, 0.3-1.3 s).
MAX_CHUNK = 512
# The sends that failed are tried this many times more at once, before the step is left to
# the outbox's retry (core.runs.sender).
SEND_RETRIES = 1
CREATE_CHUNK = 64  # item documents created between two looks at the lease
# Called once, in the caller's own context, when every message of a step is out (before
# the step is marked sent and the run updated): the intake answers its POST then
# (functions.runs_api), enqueued, and those writes follow the answer. Unset (the timer,
# the agents' calls): nothing is called.
STEP_OUT: ContextVar[Callable[[], None] | None] = ContextVar("step_out", default=None)


class SendInProgress(Exception):
    """Another caller is sending this step's items; its lease lapses at ``lapses_ms``
    (None: the step was sent meanwhile)."""

    def __init__(self, step: int, lapses_ms: int | None = None) -> None:
        super().__init__(f"step {step} is being sent by another caller")
        self.step = step
        self.lapses_ms = lapses_ms


def lapses_ms(step: Step) -> int | None:
    """When the step's sender's lease lapses (None: nobody holds it, or it was sent)."""
    if step.enqueued or step.sending_ms is None:
        return None
    return step.sending_ms + SEND_LEASE_MS


def taking_send(now_ms: int, taken: list[bool]) -> Callable[[Step], bool | None]:
    """The change that makes its caller the step's sender: ``taken`` says whether it did
    (not when the step was sent, or another sender renewed its lease less than
    SEND_LEASE_MS ago)."""

    def take(s: Step) -> bool | None:
        held = lapses_ms(s)
        taken[:] = [not s.enqueued and (held is None or now_ms >= held)]
        if not taken[0]:
            return False
        s.sending_ms = now_ms
        return None

    return take


def renewing(
    held_ms: int, now_ms: int, unsent: list[int] | None, kept: list[bool]
) -> Callable[[Step], bool | None]:
    """The change a sender writes as it goes: its lease (the mark ``held_ms`` it wrote
    last) runs from ``now_ms`` again, and the step records the clients it has not sent
    yet (``unsent``; None: its items are still being created, the record stays). ``kept``
    says whether the lease was still its own (not when another sender took it over, or
    the step was marked sent)."""

    def renew(s: Step) -> bool | None:
        kept[:] = [s.sending_ms == held_ms and not s.enqueued]
        if not kept[0]:
            return False
        s.sending_ms = now_ms
        if unsent is not None:
            s.unsent = list(unsent)
        return None

    return renew


def giving_up_send(held_ms: int, unsent: list[int] | None) -> Callable[[Step], bool | None]:
    """The change a sender that could not reach the store or the queue writes: its lease
    (the mark ``held_ms`` it wrote last) is given back, unless another sender took it
    since, with the clients it did not send to (``unsent``; None: its items were not all
    created, the step keeps what it had)."""

    def give_up(s: Step) -> bool | None:
        if s.sending_ms != held_ms:
            return False
        s.sending_ms = None
        if unsent is not None:
            s.unsent = list(unsent)
        return None

    return give_up


def still_to_send(unsent: list[int] | None, work: Sequence[WorkItem]) -> list[WorkItem]:
    """The items a sender sends: every one, or those an earlier sender did not get out
    (issue 29: a single send that timed out sent all 1,000 again)."""
    if unsent is None:
        return list(work)
    left = set(unsent)
    return [w for w in work if w.client in left]


def next_chunk(last_size: int, last_ms: int) -> int:
    """How many messages to send before the sender looks at its lease again: as many as
    the last chunk's rate (``last_size`` in ``last_ms``) sends in RENEW_EVERY_MS, from 1
    to MAX_CHUNK (a chunk that took no time at all: MAX_CHUNK)."""
    if last_ms <= 0:
        return MAX_CHUNK
    return max(1, min(MAX_CHUNK, last_size * RENEW_EVERY_MS // last_ms))


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
