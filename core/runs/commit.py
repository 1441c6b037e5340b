"""The commit point of a run's creation (issue 24.4): a run whose creation was answered with
an error never runs.

A POST is answered within ``ANSWER_MS``. The run document's creation is the commit point,
*as the database timestamps it* (``_ts``, the server's clock, whole seconds): the document
counts only if it was stored by ``accept_by_s``, a second boundary at least ``SKEW_MS``
before the answer's deadline. So:

- The API answers 202 only for a run whose creation it saw stored in time, and only if it
  has not answered already (``Answer``: the request's handler answers 503 at the deadline
  and the creation can no longer commit; whichever comes first wins).
- A creation the database applies late (it was paused: the request waited in its socket)
  has a later ``_ts``: the run is *void*, whoever reads it, whenever. A creation the API
  saw stored but could not commit (it had answered 503 meanwhile) is voided by the API
  at once (compare-and-swap on the document it created).
- The decision is written on the run (``accepted``) by its first change: by the creator,
  right before its first step is sent (``accepting``), or by the timer. The timer decides a
  run nobody decided only after ``DECIDE_GRACE_MS`` (its creator may still be voiding it),
  from the document alone: stored in time, accepted; late, void.
- A void run is failed, finished and never delivered: its targets are free, and its
  Idempotency-Key may be used again (the retry revives it, core.runs.intake).

One case is left, and said: the database stores the document in time and then cannot be
reached again, neither for its answer nor for the API's void, until the grace has passed.
Then the caller heard 503 and the run runs. A caller sending an Idempotency-Key (benchctl
and the bots always do) retries and is answered with that run.

Pure: the verdict (``verdict``, ``late``, ``in_time``) and the changes that record it
(``accepting``, ``voiding``); ``core.runs.decide`` says when, ``core.runs.lifecycle`` writes
them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from core.errors import StoreUnavailable
from core.models.state import FINISHED_RUN, DeliveryState, RunState
from core.models.stored import Run

ANSWER_MS = 3_500  # a POST is answered within this, plus the HTTP round (the docs: 5 s)
SKEW_MS = 500  # the API's and the database's clocks may differ by this much
DECIDE_GRACE_MS = 10_000  # after this, a run nobody decided is judged by its timestamp
VOID_REASON = (
    "not accepted: its creation was answered with an error (the database did not confirm it "
    "in time), so it never ran"
)


class Abandoned(StoreUnavailable):
    """The request was answered already (503): this creation may not commit."""


def accept_by_s(deadline_ms: int) -> int:
    """The last whole second (database time) a creation answered by ``deadline_ms`` may
    carry: every instant of it is at least SKEW_MS before the deadline."""
    return (deadline_ms - SKEW_MS) // 1000 - 1


class Answer:
    """What a POST answers, decided once: committed (202, with the run) or abandoned (the
    handler answered 503 at the deadline). Thread-safe: the handler and the thread doing
    the intake race for it."""

    def __init__(
        self,
        deadline_ms: int,
        clock: Callable[[], float],
        on_enqueued: Callable[[], None] | None = None,
    ) -> None:
        self.deadline_ms = deadline_ms
        self.clock = clock
        # Called from the intake's thread once the committed run's first step's messages
        # are all out (``enqueued``): the handler may answer then (functions.runs_api).
        self._on_enqueued = on_enqueued
        self.sent = False
        self._lock = threading.Lock()
        self._state: str | None = None  # "committed" | "abandoned"
        self.run: Run | None = None
        # What was committed: this request's creation (202) or a replay of another's (200).
        self.created = False

    def _late(self) -> bool:
        return int(self.clock() * 1000) > self.deadline_ms

    def commit(self, run: Run, *, created: bool) -> bool:
        """``created``: the run is this request's creation (202), not a replay (200); the
        handler that answers at its deadline says which (a replay committed and then held
        up was answered 202: one key answered 202 twice under load)."""
        with self._lock:
            if self._state is None and not self._late():
                self._state, self.run, self.created = "committed", run, created
            return self._state == "committed"

    def enqueued(self) -> None:
        """Every message of the run's first step is out (the step is not marked sent yet)."""
        self.sent = True
        if self._on_enqueued is not None:
            self._on_enqueued()

    @property
    def committed(self) -> bool:
        return self._state == "committed"

    def abandon(self) -> bool:
        """The handler's deadline: True when the answer is now 503 (nothing committed)."""
        with self._lock:
            if self._state is None:
                self._state = "abandoned"
            return self._state == "abandoned"

    def check(self) -> None:
        """Between the intake's steps: stop early once the answer is 503."""
        with self._lock:
            if self._state == "abandoned" or (self._state is None and self._late()):
                raise Abandoned("the request was answered before its run was stored")


def landed_s(run: Run) -> int | None:
    """When the database stored the run's creation (its first ``_ts``)."""
    return run.landed_s if run.landed_s is not None else run.ts


def late(run: Run) -> bool:
    """Stored after its creation's answer deadline: void, whoever reads it."""
    at = landed_s(run)
    return (
        run.accepted is None
        and run.accept_by_s is not None
        and at is not None
        and at > run.accept_by_s
    )


def verdict(run: Run, now_ms: int) -> bool | None:
    """Accepted (True), void (False), or not to be decided yet by anyone but its creator
    (None: within DECIDE_GRACE_MS of its creation)."""
    if run.accepted is not None:
        return run.accepted
    if run.accept_by_s is None:
        return True  # created before the commit point was kept
    if late(run):
        return False
    if now_ms < run.created_ms + DECIDE_GRACE_MS:
        return None
    return True


def in_time(run: Run) -> bool:
    """The creator's check of the document it just stored."""
    at = landed_s(run)
    return run.accept_by_s is None or (at is not None and at <= run.accept_by_s)


def accepting(r: Run) -> bool | None:
    """Record that the run counts (its creator, or the timer once the grace has passed):
    before its first step is sent. A run decided meanwhile is left as it is
    (``core.runs.lifecycle.Lifecycle.accept`` writes it)."""
    if r.accepted is not None:
        return False
    r.accepted = True
    if not r.admitted:
        r.due_ms = None  # nothing to do for it until it is admitted
    return None


def voiding(generation: int) -> Callable[[Run], bool | None]:
    """The change that fails attempt ``generation`` of a run, whose creation does not
    count, unless it was accepted meanwhile (``core.runs.lifecycle.Lifecycle.void`` writes
    it and frees what it took). A later attempt (the run revived under its Idempotency-Key
    since the void was decided) is left as it is: a late creation's void landing after a
    twin had revived the run in time failed the revival its twin had answered 202 for
    (40 POSTs on 30 keys through 3 instances: one key answered 202 twice)."""

    def change(r: Run) -> bool | None:
        if r.generation != generation:
            return False
        if r.accepted is not None or (r.finished and r.state in FINISHED_RUN):
            return False
        r.accepted = False
        if r.state not in FINISHED_RUN:
            r.move(RunState.FAILED)
        r.error, r.finished, r.due_ms = VOID_REASON, True, None
        if r.delivery.state == DeliveryState.PENDING:
            r.delivery.move(DeliveryState.FAILED)
        return None

    return change
