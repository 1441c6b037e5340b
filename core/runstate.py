"""States of runs and items, and how a run's state follows from its items (pure)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

RunState = Literal["queued", "running", "completed", "failed", "cancelled"]
ItemState = Literal["queued", "running", "completed", "failed", "cancelled"]
TERMINAL_ITEM_STATES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
TERMINAL_RUN_STATES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


def derive_run_state(
    item_states: Iterable[str], *, cancel_requested: bool, finalized: bool
) -> RunState:
    """A run is completed only once the timer has stored its aggregate (``finalized``);
    until then a run whose items all finished still reads as running."""
    states = list(item_states)
    if cancel_requested:
        return "cancelled"
    if finalized:
        return "failed" if any(s == "failed" for s in states) else "completed"
    if all_items_terminal(states) and any(s == "failed" for s in states):
        return "failed"  # say so at once; the timer still adds the partial aggregate
    if any(s in ("running", "completed", "failed") for s in states):
        return "running"
    return "queued"


def all_items_terminal(item_states: Iterable[str]) -> bool:
    states = list(item_states)
    return bool(states) and all(s in TERMINAL_ITEM_STATES for s in states)
