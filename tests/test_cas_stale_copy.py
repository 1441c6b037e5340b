"""A compare-and-swap tried first on the copy its caller holds (core.runs.cas.update's
``first``) does not conclude "nothing to write" from that copy alone: the copy may be
stale, and the stored document may need the change. A stale copy that needs a write fails
its swap and is read again; one that needs none must be read again too, or a send is left
to a sender that already gave it back (the step waits out a lease nobody holds).

On the in-memory store (core.memory), with the step and run documents the API keeps."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import BaseModel

from core.errors import Conflict
from core.models.ids import step_id
from core.models.stored import Step
from core.runs.cas import update
from core.runs.sending import giving_up_send, taking_send
from tests.test_thousand_clients import World

RUN = "r-stale"


@pytest.mark.unit
def test_a_send_is_taken_when_the_copy_in_hand_still_shows_a_lease_since_given_back() -> None:
    world = World(1)
    life, items = world.service.lifecycle, world.store.items
    now = world.clock.ms()
    held = items.create_step(Step(id=step_id(RUN, 0), run_id=RUN, step=0, clients=1))
    held = life.update_step(RUN, 0, lambda s: setattr(s, "sending_ms", now))  # sender A
    life.update_step(RUN, 0, giving_up_send(now, None))  # A could not send: lease back
    taken: list[bool] = []
    after = life.update_step(RUN, 0, taking_send(now + 1, taken), read=held)  # B, copy of before
    assert taken == [True]
    assert after.sending_ms == now + 1 == items.get_step(RUN, 0).sending_ms


class Doc(BaseModel):
    etag: str
    value: int


class Stored:
    def __init__(self, value: int) -> None:
        self.doc, self.reads, self.writes = Doc(etag="1", value=value), 0, 0

    def read(self) -> Doc:
        self.reads += 1
        return self.doc.model_copy()

    def write(self, d: Doc) -> Doc:
        if d.etag != self.doc.etag:
            raise Conflict("a stale copy's swap fails")
        self.writes += 1
        self.doc = Doc(etag=str(int(d.etag) + 1), value=d.value)
        return self.doc


def at_least(n: int) -> Callable[[Doc], bool | None]:
    def change(d: Doc) -> bool | None:
        if d.value >= n:
            return False
        d.value = n
        return None

    return change


@pytest.mark.unit
def test_nothing_to_write_on_the_callers_copy_is_checked_on_one_fresh_read() -> None:
    stored = Stored(3)
    stale = Doc(etag="0", value=9)
    assert update(stored.read, stored.write, at_least(5), "doc", first=stale).value == 5
    assert (stored.reads, stored.writes) == (1, 1)
    # Nothing to write on the copy nor on the fresh read: the fresh read is the answer.
    stored = Stored(7)
    assert update(stored.read, stored.write, at_least(5), "doc", first=stale) == stored.doc
    assert (stored.reads, stored.writes) == (1, 0)
    # Without a copy of its caller's, a read is fresh: one read, no second.
    assert update(stored.read, stored.write, at_least(5), "doc") == stored.doc
    assert stored.reads == 2


@pytest.mark.unit
def test_a_caller_that_asks_again_soon_may_keep_the_verdict_on_its_copy() -> None:
    """A heartbeat (core.runs.agent_reports): nothing to record on the item it just read is
    the answer, without a read; a change to write still fails a stale copy's swap."""
    stored = Stored(3)
    stale = Doc(etag="0", value=9)
    got = update(stored.read, stored.write, at_least(5), "doc", first=stale, trusted=True)
    assert got == stale
    assert (stored.reads, stored.writes) == (0, 0)
    stale = Doc(etag="0", value=1)
    got = update(stored.read, stored.write, at_least(5), "doc", first=stale, trusted=True)
    assert got.value == 5 and (stored.reads, stored.writes) == (1, 1)
