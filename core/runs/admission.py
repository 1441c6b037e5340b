"""One run at a time per target (pure logic over the Store protocol).

Each (pool, target) has a lock document naming the run that holds it. A run takes every
lock it needs, in sorted order, by compare-and-swap; if one is held by a run still doing
I/O it gives back what it took and waits. Nothing releases a lock: a lock whose holder has
finished (or never got written) is free, so a crashed holder cannot wedge a target.

Waiting runs are admitted strictly in submission order per target: a run never starts
while an earlier waiting run shares one of its targets, so a run on targets A and B and
another on B and A cannot each hold one and wait forever.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from core.errors import Conflict, NotFound
from core.ports import Doc, Store
from core.runs.state import HELD_ITEM_STATES

# A lock taken for a run whose document is not written yet (the write follows at once).
UNWRITTEN_HOLDER_GRACE_MS = 60_000
LOCK_CAS_ATTEMPTS = 20


def lock_keys(pool: str, targets: Iterable[str]) -> list[str]:
    # Cosmos ids may not contain "/": pools and aliases never contain ":".
    return sorted({f"{pool}:{t}" for t in targets})


def run_keys(run: Doc) -> list[str]:
    return lock_keys(run["pool"], run.get("targets") or [run["target"]])


@dataclass(frozen=True)
class Busy:
    key: str
    holder: str  # run id
    waiting: int  # runs already waiting for this target


def holder_done(run: Doc) -> bool:
    """True once the run does no more I/O: every item ended, or it never started."""
    if run.get("finished") or run.get("state") in ("completed", "failed"):
        return True
    if run.get("admitted") is False:
        return True
    held = any(run.get("counts", {}).get(s) for s in HELD_ITEM_STATES)
    return run.get("state") == "cancelled" and not held


class Admission:
    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _held_by_other(self, lock: Doc, run_id: str) -> bool:
        holder = lock.get("run_id")
        if not holder or holder == run_id:
            return False
        try:
            return not holder_done(self.store.get_run(holder))
        except NotFound:
            return self._now_ms() - int(lock.get("since_ms", 0)) < UNWRITTEN_HOLDER_GRACE_MS

    def _lock(self, key: str) -> Doc:
        try:
            return self.store.get_target_lock(key)
        except NotFound:
            try:
                return self.store.create_target_lock({"id": key, "run_id": None, "since_ms": 0})
            except Conflict:
                return self.store.get_target_lock(key)

    def busy(self, keys: list[str], run_id: str, waiting: list[Doc]) -> Busy | None:
        """The first of ``keys`` another run holds or an earlier run waits for."""
        for key in keys:
            ahead = [w for w in waiting if key in run_keys(w) and w["id"] != run_id]
            lock = self._lock(key)
            if self._held_by_other(lock, run_id):
                return Busy(key, str(lock["run_id"]), len(ahead))
            if ahead:
                return Busy(key, ahead[0]["id"], len(ahead))
        return None

    def try_acquire(self, keys: list[str], run_id: str) -> bool:
        """Take every lock for ``run_id`` or none (what was taken is handed back)."""
        taken: list[str] = []
        for key in keys:
            if not self._take(key, run_id):
                for k in taken:
                    self._give_back(k, run_id)
                return False
            taken.append(key)
        return True

    def _take(self, key: str, run_id: str) -> bool:
        for _ in range(LOCK_CAS_ATTEMPTS):
            lock = self._lock(key)
            if lock.get("run_id") == run_id:
                return True
            if self._held_by_other(lock, run_id):
                return False
            lock.update(run_id=run_id, since_ms=self._now_ms())
            try:
                self.store.replace_target_lock(lock)
                return True
            except Conflict:
                continue  # someone else moved first: look again
        return False

    def _give_back(self, key: str, run_id: str) -> None:
        for _ in range(LOCK_CAS_ATTEMPTS):
            lock = self._lock(key)
            if lock.get("run_id") != run_id:
                return
            lock.update(run_id=None, since_ms=0)
            try:
                self.store.replace_target_lock(lock)
                return
            except Conflict:
                continue

    def position(self, run: Doc, waiting: list[Doc]) -> int:
        """1 + the runs waiting ahead of ``run`` on any of its targets."""
        keys = set(run_keys(run))
        ahead = [
            w
            for w in waiting
            if w["id"] != run["id"]
            and (w["created_ms"], w["id"]) < (run["created_ms"], run["id"])
            and keys & set(run_keys(w))
        ]
        return 1 + len(ahead)

    def admissible(self, waiting: list[Doc]) -> list[Doc]:
        """Waiting runs in submission order that no earlier waiting run blocks."""
        blocked: set[str] = set()
        out = []
        for run in sorted(waiting, key=lambda w: (w["created_ms"], w["id"])):
            keys = set(run_keys(run))
            if not keys & blocked:
                out.append(run)
            blocked |= keys
        return out
