"""States of runs, steps and items, and how a run's state follows from them (pure)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

RunState = Literal["waiting", "queued", "running", "completed", "failed", "cancelled"]
HELD_ITEM_STATES: frozenset[str] = frozenset({"claimed", "ready", "running"})
TERMINAL_ITEM_STATES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


def derive_run_state(
    item_states: Iterable[str],
    *,
    cancel_requested: bool,
    finalized: bool,
    finished: bool,
    admitted: bool = True,
) -> RunState:
    """``finished``: no item will run any more (every step ran or one failed at its
    barrier). A run is completed only once the timer has stored its aggregates
    (``finalized``); a finished run with a failed client reads as failed at once."""
    states = list(item_states)
    if cancel_requested:
        return "cancelled"
    if not admitted:  # its target is busy with another run
        return "waiting"
    if finished and any(s == "failed" for s in states):
        return "failed"
    if finalized:
        return "completed"
    if any(s != "queued" for s in states):
        return "running"
    return "queued"
