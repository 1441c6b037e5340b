"""The states of runs, steps and work items and the legal moves between them (pure). The
stored documents (core.models.stored) change only through their moves, so a state can
only move along an edge written here.

A run is a list of steps run one after another; a step of N clients has N items, each
taken by a distinct agent. An item's life::

    queued -> claimed -> ready -> running -> completed
       |         |         |         |         ^
       |         |         +---------|---------+   (its result stored before its start report)
       |         |         |         |
       +---------+---------+---------+--> failed | cancelled   (terminal)
                 |         |         |
                 +---------+---------+--> queued   (a failed attempt, to be redelivered)
                 +---------+---------+--> claimed  (redelivered: the holder's lease ran out)

A run's state follows from its items and steps (``derive_run_state``) and moves along
``RUN_MOVES``; its outbox (``Delivery``) along ``DELIVERY_MOVES``. A step's start barrier
has no stored state: it is read from its fields (``Step.state``), which change only through
the step's methods, along ``STEP_MOVES``. The documents that move along these edges are
core.models.stored.
"""

from __future__ import annotations

from enum import StrEnum

from core.errors import BenchError


class RunState(StrEnum):
    WAITING = "waiting"  # its target is held by another run
    QUEUED = "queued"
    # Admitted to an elastic pool that is growing: its step is sent once enough agents
    # are live (core.fleet.scaling); ``provisioning`` says why and who is missing.
    PROVISIONING = "provisioning"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ItemState(StrEnum):
    QUEUED = "queued"
    CLAIMED = "claimed"
    READY = "ready"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


# Ticks of the timer that may fail on one run with an unexpected error before the run is
# failed alone, "internal error: ..." (core.runs.timer).
INTERNAL_ERROR_ATTEMPTS = 5

HELD = frozenset({ItemState.CLAIMED, ItemState.READY, ItemState.RUNNING})
TERMINAL = frozenset({ItemState.COMPLETED, ItemState.FAILED, ItemState.CANCELLED})
FINISHED_RUN = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED})

# A finished run never changes state again. Every edge below is one ``derive_run_state`` or
# the elastic pool's hold can take; the ones that look backwards are marked.
RUN_MOVES: dict[RunState, frozenset[RunState]] = {
    # Admitted, or cancelled while it waited (derive checks the cancel first). Failed: never
    # by its delivery (that fails only once it is admitted), but by an internal error the
    # timer gave up on (core.runs.timer) or a creation answered with an error (void).
    RunState.WAITING: frozenset({RunState.QUEUED, RunState.CANCELLED, RunState.FAILED}),
    # Completed straight from queued: the first claim's advance did not happen (a crash) and
    # the next one finds the run finalized.
    RunState.QUEUED: frozenset({RunState.PROVISIONING, RunState.RUNNING}) | FINISHED_RUN,
    # Back to queued once its first step is sent; to running once a later one is. Completed:
    # a later step given up on leaves no failed item, and the run completes with the steps
    # that ran, its error saying why (as a step that could not be sized does).
    RunState.PROVISIONING: frozenset({RunState.QUEUED, RunState.RUNNING}) | FINISHED_RUN,
    # Queued: every item of its step went back to the queue to be redelivered (or an advance
    # that read the items before the first claim wrote after one that read them after).
    # Provisioning: its next step waits for its elastic pool to grow.
    RunState.RUNNING: frozenset({RunState.QUEUED, RunState.PROVISIONING}) | FINISHED_RUN,
    **{done: frozenset() for done in FINISHED_RUN},
}

ITEM_MOVES: dict[ItemState, frozenset[ItemState]] = {
    ItemState.QUEUED: frozenset({ItemState.CLAIMED, ItemState.FAILED, ItemState.CANCELLED}),
    **{
        held: frozenset(
            {ItemState.CLAIMED, ItemState.QUEUED, ItemState.FAILED, ItemState.CANCELLED}
            | {
                ItemState.CLAIMED: {ItemState.READY},
                ItemState.READY: {ItemState.RUNNING, ItemState.COMPLETED},
                ItemState.RUNNING: {ItemState.COMPLETED},
            }[held]
        )
        for held in HELD
    },
    **{done: frozenset() for done in TERMINAL},
}


class IllegalMove(BenchError):
    """A state change the lifecycle does not allow (a bug, never a caller's doing)."""


class DeliveryState(StrEnum):
    """A run's outbox: its first step, sent once the run is admitted."""

    WAITING = "waiting"  # not admitted yet
    PENDING = "pending"  # admitted, its first step not sent yet (the timer retries)
    SENT = "sent"
    FAILED = "failed"  # the queue, or the elastic pool, never took it: the run fails


DELIVERY_MOVES: dict[DeliveryState, frozenset[DeliveryState]] = {
    DeliveryState.WAITING: frozenset({DeliveryState.PENDING}),
    DeliveryState.PENDING: frozenset({DeliveryState.SENT, DeliveryState.FAILED}),
    DeliveryState.SENT: frozenset(),
    DeliveryState.FAILED: frozenset(),
}


class StepState(StrEnum):
    """A step's start barrier, as read from its fields (not stored)."""

    PLANNED = "planned"  # its items are not marked sent
    OPEN = "open"  # sent: waiting for its clients to claim and get ready
    STARTED = "started"  # the common start instant is set
    FAILED = "failed"  # the barrier never completed (or the step could not be sent)


STEP_MOVES: dict[StepState, frozenset[StepState]] = {
    # Failed unsent: it could not be sized, or its elastic pool did not grow. Started unsent:
    # its clients got ready before the write marking it sent (or a crash skipped that write).
    StepState.PLANNED: frozenset({StepState.OPEN, StepState.STARTED, StepState.FAILED}),
    StepState.OPEN: frozenset({StepState.STARTED, StepState.FAILED}),
    # A lone client retried gets a fresh barrier (back to planned only if a crash left the
    # step unmarked). Its instant moving with a late client is no move (``move_start``).
    StepState.STARTED: frozenset({StepState.OPEN, StepState.PLANNED}),
    StepState.FAILED: frozenset(),
}
