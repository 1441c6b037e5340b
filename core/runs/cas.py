"""Compare-and-swap on one stored document: read, decide on the document as read, write if
nobody changed it since (ETag), again otherwise. Decisions are made inside ``change`` on
the fresh copy, so racing callers cannot both act on a stale view; a change that alters
nothing writes nothing."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel

from core.errors import Conflict, StoreUnavailable

CAS_ATTEMPTS = 40
M = TypeVar("M", bound=BaseModel)


class Contended(StoreUnavailable):
    """A document kept changing under us for every attempt (HTTP 503: try again)."""


def update(
    read: Callable[[], M],
    write: Callable[[M], M],
    change: Callable[[M], bool | None],
    what: str,
    *,
    stamp: Callable[[M], None] | None = None,
    first: M | None = None,
    trusted: bool = False,
) -> M:
    """``change`` edits a copy of the document as read and returns False for "nothing to
    write"; the document is returned as written (or as read, when nothing changed).
    ``stamp`` marks a document that did change (an ``updated_at``) before it is written.
    ``first``: the document as the caller just read it, tried instead of a first read (a
    stale copy fails its swap and is read afresh; nothing to write on it is checked on a
    fresh read, as the stored document may need the change: ``change`` runs again).
    ``trusted``: nothing to write on ``first`` is the answer, for a caller that asks
    again soon anyway (a heartbeat a second) and cannot afford the read."""
    for attempt in range(CAS_ATTEMPTS):
        current = first if attempt == 0 and first is not None else read()
        draft = current.model_copy(deep=True)
        if change(draft) is False or draft.model_dump() == current.model_dump():
            if current is first and not trusted:
                continue
            return current
        if stamp is not None:
            stamp(draft)
        try:
            return write(draft)
        except Conflict:
            # Many agents report at once at a step's start: back off a little, with jitter.
            time.sleep(random.uniform(0, 0.005 * (attempt + 1)))
    raise Contended(f"{what} kept changing under us")
