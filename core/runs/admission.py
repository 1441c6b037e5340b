"""One run at a time per target (pure logic over the target repository).

Each (pool, target) has one lock document naming the run that holds it and the runs that
wait for it, in submission order. Admission reads only the lock documents of the run's own
targets (and the runs named there, by id): never a scan of all waiting runs.

A run takes every lock it needs, in sorted order, by compare-and-swap; if one is held by a
run still doing I/O, or an earlier run waits for it, it waits in each of its targets'
queues (or is refused). Nothing releases a lock by timer: a lock whose holder has finished
(or never got written) is free, so a crashed holder cannot wedge a target.

Queues are ordered by submission (created_ms, run id), the same order on every target,
and a run starts only at the head of all its queues: a run on targets A and B and another
on B and A cannot each hold one and wait forever.

A void run (core.runs.commit) is revived under its Idempotency-Key by writing a new
attempt over its document (core.runs.intake), with the same run id: each attempt has a
generation, and a lock carries the generation of the attempt that took it. The revival
takes over the void attempt's locks (marking them with its generation) before it writes
the run; meanwhile the lock is held as for a run not written yet, and the void attempt's
cleanup gives back only what is still marked with its own generation or an earlier one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from core.errors import Conflict, NotFound
from core.models.locks import TargetLock, Waiter
from core.models.state import RunState
from core.models.stored import Run
from core.ports import Store
from core.runs.cas import update
from core.runs.commit import late, verdict

# A lock taken for a run whose document is not written yet (the write follows at once).
UNWRITTEN_HOLDER_GRACE_MS = 60_000


def lock_keys(pool: str, targets: Iterable[str]) -> list[str]:
    # Cosmos ids may not contain "/": pools and aliases never contain ":".
    return sorted({f"{pool}:{t}" for t in targets})


def run_keys(run: Run) -> list[str]:
    return lock_keys(run.pool, run.targets)


def target_of(key: str) -> str:
    return key.split(":", 1)[1]


class TargetBusy(Conflict):
    pass


def holder_done(run: Run) -> bool:
    """True once the run does no more I/O: every item ended (a cancelled run too, once its
    agents have stopped), or it failed before starting. A run holding locks but not yet
    marked admitted is being admitted (a crash may leave it so; the timer finishes it)."""
    # A cancelled run reads "cancelled" at once, while its agents may still be stopping fio.
    # A run stored too late never runs (core.runs.commit), voided yet or not.
    return run.finished or run.state in (RunState.COMPLETED, RunState.FAILED) or late(run)


def waiting(run: Run) -> bool:
    """Stored, and still to be admitted: neither admitted, nor cancelled, nor void, nor
    ended."""
    return (
        not run.admitted
        and not run.cancel_requested
        and not run.finished
        and verdict(run, 0) is not False
    )


def ahead(lock: TargetLock, me: Waiter) -> list[Waiter]:
    """The waiters queued before ``me`` for this target, in order. A run already in the
    queue keeps the place it has: two requests with one Idempotency-Key (on two instances,
    or two threads) each read their own clock, and the later one's earlier instant must not
    let the run take the target from runs queued between the two instants (it then held a
    target while waiting behind them: neither ever started)."""
    mine = next((w for w in lock.queue if w.run_id == me.run_id), me)
    return [w for w in lock.queue if w.order < mine.order and w.run_id != me.run_id]


def position(locks: Iterable[TargetLock], me: Waiter) -> int:
    """1 + the runs waiting ahead of ``me`` on any of these targets."""
    return 1 + len({w.run_id for lock in locks for w in ahead(lock, me)})


@dataclass(frozen=True)
class Busy:
    key: str
    holder: str | None  # the run holding it, if any
    waiting: int  # runs already waiting for it


class Admission:
    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ---- reading ----------------------------------------------------------------------

    def _lock(self, key: str) -> TargetLock:
        try:
            return self.store.targets.get(key)
        except NotFound:
            try:
                return self.store.targets.create(TargetLock(id=key))
            except Conflict:
                return self.store.targets.get(key)

    def lock_of(self, key: str) -> TargetLock | None:
        """The target's lock document, if anyone ever took it (a read, never a write)."""
        try:
            return self.store.targets.get(key)
        except NotFound:
            return None

    def _run(self, run_id: str) -> Run | None:
        try:
            return self.store.runs.get(run_id)
        except NotFound:
            return None

    def holds(self, lock: TargetLock, run_id: str) -> bool:
        """Whether another run than ``run_id`` holds the lock and may still do I/O. Taken for
        an attempt not written yet (a new run, or a revival: the lock's generation is ahead
        of the void document's), it is held for a grace."""
        holder = lock.run_id
        if not holder or holder == run_id:
            return False
        run = self._run(holder)
        if run is None or lock.generation > run.generation:
            return self._now_ms() - lock.since_ms < UNWRITTEN_HOLDER_GRACE_MS
        return not holder_done(run)

    def _live(self, waiter: Waiter) -> bool:
        """A waiter still waiting: its run exists (or is being written) and was neither
        cancelled nor admitted."""
        run = self._run(waiter.run_id)
        if run is None:
            return self._now_ms() - waiter.created_ms < UNWRITTEN_HOLDER_GRACE_MS
        return waiting(run)

    def busy(
        self, keys: list[str], me: Waiter, seen: dict[str, TargetLock] | None = None
    ) -> Busy | None:
        """The first of ``keys`` another run holds or an earlier run waits for. Only the
        first waiter ahead is looked up (a queue's entries leave it when their run starts
        or is cancelled; a dead one is dropped when found). The locks read are left in
        ``seen``: the change that follows starts from them instead of reading them again
        (a stale one fails its compare-and-swap and is read afresh)."""
        for key in keys:
            lock = self._lock(key)
            if seen is not None:
                seen[key] = lock
            before = ahead(lock, me)
            if self.holds(lock, me.run_id):
                return Busy(key, lock.run_id, len(before))
            for w in before:
                if self._live(w):
                    return Busy(key, w.run_id, len(before))
                self._drop(key, w.run_id)
        return None

    def position(self, run: Run) -> int:
        """1 + the runs waiting ahead of ``run`` on any of its targets."""
        me = Waiter(run_id=run.id, created_ms=run.created_ms)
        return position([self._lock(key) for key in run_keys(run)], me)

    # ---- taking and waiting -------------------------------------------------------------

    def try_acquire(
        self,
        keys: list[str],
        me: Waiter,
        seen: dict[str, TargetLock] | None = None,
        *,
        generation: int = 0,
    ) -> bool:
        """Take every lock for ``me`` (its attempt ``generation``) or none (what was taken
        is handed back). A lock is taken only if no earlier live waiter queues for it.
        ``me`` stays in the queues until it is marked admitted (``leave``): a crash in
        between leaves it at their head, where the timer finds it and finishes its
        admission."""
        taken: list[str] = []
        for key in keys:
            if not self._take(key, me, seen, generation):
                for k in taken:
                    self._give_back(k, me.run_id, generation)
                return False
            taken.append(key)
        return True

    def _take(
        self, key: str, me: Waiter, seen: dict[str, TargetLock] | None, generation: int
    ) -> bool:
        got: list[bool] = [False]

        def take(lock: TargetLock) -> bool | None:
            mine = lock.run_id == me.run_id
            got[0] = mine and lock.generation > generation
            if got[0]:
                return False  # a later attempt of the same run holds it: this one is void
            if not mine and (
                self.holds(lock, me.run_id) or any(self._live(w) for w in ahead(lock, me))
            ):
                return False
            # A revival taking over its void attempt's lock holds it anew, as a new run.
            anew = not mine or lock.generation != generation
            lock.since_ms = self._now_ms() if anew else lock.since_ms
            lock.run_id, lock.generation = me.run_id, generation
            got[0] = True
            return None

        self._change(key, take, seen)
        return got[0]

    def _give_back(self, key: str, run_id: str, generation: int) -> None:
        """Free the lock if this attempt of the run (or an earlier one) holds it; a later
        attempt that took it over keeps it."""

        def give(lock: TargetLock) -> bool | None:
            if lock.run_id != run_id or lock.generation > generation:
                return False
            lock.run_id, lock.since_ms, lock.generation = None, 0, 0
            return None

        self._change(key, give)

    def _change(
        self,
        key: str,
        change: Callable[[TargetLock], bool | None],
        seen: dict[str, TargetLock] | None = None,
    ) -> TargetLock:
        known = seen.pop(key, None) if seen is not None else None
        replace = self.store.targets.replace
        return update(lambda: self._lock(key), replace, change, f"target {key}", first=known)

    def wait(self, keys: list[str], me: Waiter, seen: dict[str, TargetLock] | None = None) -> None:
        """Join every key's queue, in submission order (idempotent)."""

        def join(lock: TargetLock) -> bool | None:
            if any(w.run_id == me.run_id for w in lock.queue):
                return False
            lock.queue = sorted([*lock.queue, me], key=lambda w: w.order)
            return None

        for key in keys:
            self._change(key, join, seen)

    def leave(self, run: Run) -> None:
        """Out of every queue: a waiting run admitted, or cancelled."""
        for key in run_keys(run):
            self._drop(key, run.id)

    def release(self, run: Run) -> None:
        """A finished run gives its locks back (free already by rule; this just lets the
        next run in without reading the finished one)."""
        for key in run_keys(run):
            self._give_back(key, run.id, run.generation)

    def admit_next(self, keys: Iterable[str]) -> list[Run]:
        """Start, in submission order, the runs at the head of these targets' queues whose
        targets are all free: their locks are taken; the caller marks them admitted and
        then takes them out of the queues (``leave``)."""
        admitted = []
        for key in sorted(set(keys)):
            lock = self._lock(key)
            for w in list(lock.queue):
                if not self._live(w):
                    self._drop(key, w.run_id)
                    continue
                run = self._run(w.run_id)
                # A head whose creation is not decided yet waits (core.runs.commit): the
                # timer's look at free targets with runs waiting starts it once it is.
                undecided = run is not None and verdict(run, self._now_ms()) is None
                if (
                    run is not None
                    and not undecided
                    and self.try_acquire(run_keys(run), w, generation=run.generation)
                ):
                    admitted.append(run)
                break  # only the head of a queue may start
        return admitted

    def _drop(self, key: str, run_id: str) -> None:
        """Out of this target's queue; back in at once if the run, read after the drop, is
        waiting. A run is dropped on what was read of it earlier (void, by a twin request
        or by the void's own cleanup), and its Idempotency-Key may have revived it since
        and put it in line, a no-op while the old entry was there: without this it waited
        in no queue, and nothing ever admitted it (found by 40 concurrent POSTs on 30 keys
        through 3 instances). Whoever acts last restores it: the reviver joins after
        storing the revived run, so either it joins after this drop or this read sees it."""
        dropped: list[bool] = [False]

        def drop(lock: TargetLock) -> bool | None:
            before = len(lock.queue)
            lock.queue = [w for w in lock.queue if w.run_id != run_id]
            dropped[0] = len(lock.queue) != before
            return None if dropped[0] else False

        self._change(key, drop)
        run = self._run(run_id) if dropped[0] else None
        if run is not None and waiting(run):
            self.wait([key], Waiter(run_id=run.id, created_ms=run.created_ms))

    def stalled(self) -> list[str]:
        """Targets runs wait for that nobody is starting: free, or held by a run that has
        ended or was never written (free by rule, but its release did not happen: a
        crash), or by a waiting run whose admission was cut short. The timer admits there.
        Read without the queues; a live holder's waiters start when it releases."""
        out = []
        for lock in self.store.targets.with_waiters():
            holder = self._run(lock.run_id) if lock.run_id else None
            if lock.run_id and (holder is None or lock.generation > holder.generation):
                stuck = self._now_ms() - lock.since_ms >= UNWRITTEN_HOLDER_GRACE_MS
            else:
                stuck = holder is None or holder_done(holder) or not holder.admitted
            if stuck:
                out.append(lock.id)
        return out
