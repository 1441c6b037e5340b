"""Each bug the simulation found (issue 24.6), kept as the shortest sequence of actions that
showed it (tests/sim/shrink.py), replayed on the fixed code: every invariant holds and
every run ends. Each failed before its fix (the seed that found it is named)."""

from __future__ import annotations

import pytest

from tests.sim.driver import A, Action, Sim

FOUND: dict[str, list[Action]] = {
    # Issue 24.4 itself, found by the simulation with the commit point undone (a creation
    # counting however late the database stored it, core/runs/commit.py): the database
    # paused in the middle of a POST, which was answered 503; its run was stored when the
    # database resumed, and the timer sent it.
    "a run whose POST was answered 503 ran": [
        A("post", 4, 6, 0),
        A("post", 0, 1, 0),
        A("agent", 1, 1, 697),
        A("agent", 2, 1, 213),
        A("agent", 2, 0, 748),
        A("advance", 7000, 0, 0),
        A("agent", 2, 1, 41),
        A("pause_in", 5, 0, 0),
        A("post", 5, 0, 0),
    ],
    # Seed 2 (then 4): an agent's result was stored and the answer lost; its lease ran out
    # and another agent took the item over and measured it again: the stored result said
    # one agent, the item another. A claim now completes an item whose result is stored.
    "a takeover measured again an item whose result was stored": [
        A("queue_pause", 0, 0, 0),
        A("agent", 3, 1, 489),
        A("tick", 1, 0, 0),
        A("post", 3, 2, 0),
        A("resume", 0, 0, 0),
        A("agent", 1, 0, 649),
        A("agent", 3, 1, 179),
        A("agent", 1, 0, 654),
        A("agent", 3, 1, 983),
        A("flaky", 39, 5, 2),
        A("agent", 3, 1, 444),
        A("tick", 2, 0, 0),
        A("advance", 31000, 0, 0),
        A("tick", 3, 0, 0),
        A("agent", 0, 0, 452),
        A("agent", 1, 1, 400),
    ],
    # Seed 3 (then 10): the API died while sending a two-client step, after one of its
    # messages: the step was not marked sent, and the next advance waited for all the
    # run's items to end, its own unsent ones too: the run stayed running, its target held.
    # A step whose items exist but which is not marked sent is now sent again, in full.
    "a step whose send died half-way was never sent again": [
        A("post", 3, 3, 0),
        A("post", 4, 6, 0),
        A("agent", 3, 0, 525),
        A("cancel", 596, 0, 0),
        A("advance", 4000, 0, 0),
        A("post", 1, 0, 0),
        A("advance", 4000, 0, 0),
        A("agent", 1, 1, 588),
        A("agent", 1, 1, 29),
        A("agent", 0, 1, 884),
        A("agent", 0, 1, 122),
        A("advance", 31000, 0, 0),
        A("crash", 10, 0, 0),
        A("agent", 0, 1, 499),
    ],
    # Seed 4 (then 19): a cancel recorded on a waiting run and then cut short (an outage)
    # left the run waiting for good: nothing advanced it again. The cancel now makes the
    # run due, and the timer finishes it.
    "a cancel cut short left a waiting run waiting": [
        A("post", 3, 0, 0),
        A("post", 4, 6, 0),
        A("post", 0, 0, 0),
        A("post", 4, 0, 0),
        A("post", 4, 0, 0),
        A("post", 3, 4, 0),
        A("post", 4, 0, 0),
        A("flaky", 33, 0, 3),
        A("cancel", 930, 1, 0),
    ],
    # Seed 6: the API died between marking a run finalized (which also cleared its due
    # time) and marking it finished: no one ever looked at it again; it stayed running
    # and held its target. Finalizing now leaves the run due until it is finished.
    "a crash between finalizing and finishing left the run running": [
        A("post", 2, 1, 0),
        A("post", 5, 0, 0),
        A("agent", 2, 1, 895),
        A("post", 1, 4, 0),
        A("post", 3, 1, 0),
        A("agent", 0, 1, 713),
        A("agent", 0, 0, 492),
        A("agent", 1, 1, 317),
        A("flaky", 46, 5, 0),
        A("tick", 2, 0, 0),
        A("agent", 1, 1, 696),
        A("advance", 130000, 0, 0),
        A("advance", 130000, 0, 0),
        A("tick", 2, 0, 0),
        A("cancel", 946, 1, 0),
        A("agent", 0, 1, 874),
        A("agent", 1, 0, 354),
        A("agent", 0, 0, 284),
        A("crash", 10, 0, 0),
        A("tick", 3, 0, 0),
    ],
    # Seed 2: a POST took the target's lock and then failed before its run was stored; the
    # lock named a run that never existed. Free by rule after a minute, but the timer only
    # looked at targets nobody held: the runs waiting behind it waited for good (as behind
    # a run that ended without releasing). The timer now reads every lock with waiters
    # (without their queues) and admits where the holder has ended or never was.
    "a lock whose holder never was kept its waiters waiting": [
        A("post", 0, 4, 0),
        A("agent", 3, 1, 10),
        A("queue_pause", 0, 0, 0),
        A("agent", 3, 1, 368),
        A("agent", 1, 1, 401),
        A("agent", 3, 0, 426),
        A("flaky", 16, 5, 0),
        A("resume", 0, 0, 0),
        A("agent", 3, 1, 444),
        A("post", 2, 0, 0),
        A("tick", 3, 0, 0),
        A("post", 2, 0, 0),
    ],
}


@pytest.mark.parametrize("sequence", FOUND.values(), ids=list(FOUND))
def test_a_sequence_the_simulation_found(sequence: list[Action]) -> None:
    Sim().run(sequence)  # raises Violation, naming the invariant, if it breaks again
