"""One count in flight per key in this process, shared by the callers that asked meanwhile.

Each result that ends a step's item asks how many of the step's items are still open, to
advance the run when none is (core.runs.agent_reports). At 1,000 clients that was 1,000
count queries in the results' burst, each a scan of the run's partition on the local
Cosmos DB server (~40 % of its CPU while the results were stored; an index lookup in Azure,
where it still costs request units per result).

A caller's count must see its own write, so a count already running cannot answer it: the
callers that ask while one runs join the *next* round, which starts when that one ends,
run by one of them (a round starts only after every member joined it, so it sees every
member's write). The count's answer goes to every member; only the member that ran it is
told so (``ran``), so one caller acts on a round's answer, not all of them. A count that
fails raises in every member of its round, as the caller's own count would have.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass
class _Round(Generic[V]):
    done: bool = False
    value: V | None = None
    error: BaseException | None = None


@dataclass
class _Slot(Generic[V]):
    running: bool = False
    pending: _Round[V] | None = None


class SharedCount(Generic[K, V]):
    """``ask(key, count)``: ``count()`` run after this call began, its answer and whether
    this caller ran it (at most one round per key runs at a time)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._slots: dict[K, _Slot[V]] = {}
        self.rounds = 0  # every round run (the tests compare it with the callers)

    def ask(self, key: K, count: Callable[[], V]) -> tuple[V, bool]:
        with self._cond:
            slot = self._slots.setdefault(key, _Slot())
            if slot.pending is None:
                slot.pending = _Round()
            mine = slot.pending
            while not (slot.pending is mine and not slot.running):
                if mine.done:
                    if mine.error is not None:
                        raise mine.error
                    return mine.value, False  # type: ignore[return-value]
                self._cond.wait()
            slot.running, slot.pending = True, None  # this round starts: nobody joins it now
            self.rounds += 1
        try:
            mine.value = count()
        except BaseException as e:
            mine.error = e
            raise
        finally:
            with self._cond:
                mine.done, slot.running = True, False
                if slot.pending is None and self._slots.get(key) is slot:
                    del self._slots[key]
                self._cond.notify_all()
        return mine.value, True
