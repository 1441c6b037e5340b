"""One finalizer per run (pure logic over a compare-and-swap of the run): the caller that
finalizes a finished run (its aggregates from every client's timeline, the monitor told)
first takes the run's finalize lease (``Run.finalizing_ms``); the others leave it.

Every caller that advances a run may find it finished: each of the last results' requests,
on any API instance, and the timer. Before, each of them aggregated it: at 1,000 clients
the last results' requests and the timer read the 1,000 timelines three times over and
aggregated them three times side by side (3,000 blob reads; 36 s from the last result to
``completed`` on 2 loaded cores). A finalizer that fails gives the lease back (the timer
does it at its next tick); one that died holds it until FINALIZE_LEASE_MS after it took it,
when the run is due and the timer takes it over (every write of a finalize is idempotent).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from core.errors import Conflict, StoreUnavailable
from core.models.stored import Run

# A finalizer holds the run this long: several times what aggregating the largest run takes
# (1,000 clients: 9 s on 2 cores at load 17, bench/scale.py), short enough that a dead
# finalizer's run completes within a minute or so (one that outlasts it is only done twice).
FINALIZE_LEASE_MS = 60_000
Change = Callable[[Run], bool | None]


def finalize_lapses_ms(run: Run) -> int | None:
    """When the run's finalizer's lease lapses (None: nobody holds it, or it is done)."""
    if run.finalized or run.finalizing_ms is None:
        return None
    return run.finalizing_ms + FINALIZE_LEASE_MS


def taking_finalize(now_ms: int, taken: list[bool]) -> Change:
    """The change that makes its caller the run's finalizer: ``taken`` says whether it did
    (not when it is finalized, or another caller took the lease less than
    FINALIZE_LEASE_MS ago). The run is due when the lease lapses: should this finalizer
    die, the timer finalizes it then."""

    def take(r: Run) -> bool | None:
        held = finalize_lapses_ms(r)
        taken[:] = [not r.finalized and (held is None or now_ms >= held)]
        if not taken[0]:
            return False
        r.finalizing_ms = now_ms
        r.due_ms = now_ms + FINALIZE_LEASE_MS
        return None

    return take


def giving_up_finalize(held_ms: int) -> Change:
    """The change a finalizer that failed writes: the lease (taken at ``held_ms``) is
    given back, unless another caller took it since or the run was finalized, and the run
    is due at once (the timer's next tick finalizes it)."""

    def give_up(r: Run) -> bool | None:
        if r.finalized or r.finalizing_ms != held_ms:
            return False
        r.finalizing_ms = None
        r.due_ms = held_ms
        return None

    return give_up


@contextlib.contextmanager
def finalize_lease(update: Callable[[Change], Run], now_ms: int) -> Iterator[Run | None]:
    """The run as its finalizer took it, or None when another caller holds it or it is
    finalized; an exception inside gives the lease back (best effort: otherwise it lapses)."""
    taken: list[bool] = []
    run = update(taking_finalize(now_ms, taken))
    if not taken[0]:
        yield None
        return
    try:
        yield run
    except Exception:
        with contextlib.suppress(StoreUnavailable, Conflict):
            update(giving_up_finalize(now_ms))
        raise
