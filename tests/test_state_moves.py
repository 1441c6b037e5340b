"""The legal moves of runs, deliveries and step barriers (core.models.state): each table's
edges are allowed, nothing else is, and what the lifecycle derives stays on them (pure)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from core.models import WorkItem, Workload
from core.models.state import (
    DELIVERY_MOVES,
    FINISHED_RUN,
    RUN_MOVES,
    STEP_MOVES,
    TERMINAL,
    DeliveryState,
    IllegalMove,
    ItemState,
    RunState,
    StepState,
)
from core.models.stored import Delivery, Item, Run, Step, derive_run_state

RUN = "r-" + "a" * 32


def run_in(state: RunState) -> Run:
    return Run.model_validate(
        {
            "id": RUN,
            "created_at": "2031-01-01T00:00:00Z",
            "created_ms": 1,
            "request": {"target": "scratch", "pool": "p"},
            "workload": {},
            "comparison_key": "k",
            "target": "scratch",
            "targets": ["scratch"],
            "pool": "p",
            "step_count": 1,
            "items_total": 1,
            "requested_by": {"name": "t", "role": "admin"},
            "body_hash": "h",
            "state": state,
        }
    )


def step_in(state: StepState, clients: int = 2) -> Step:
    step = Step(id=f"{RUN}.s0", run_id=RUN, step=0, clients=clients)
    if state != StepState.PLANNED:
        step.mark_sent()
    if state == StepState.STARTED:
        step.claimed(1_000, 30_000)
        step.start(5_000)
    if state == StepState.FAILED:
        step.fail("1 of 2 clients claimed within 30 s")
    assert step.state == state
    return step


def item_in(state: ItemState, n: int) -> Item:
    work = WorkItem(
        run_id=RUN,
        item_id=f"{RUN}.s0.c{n}",
        step=0,
        client=n,
        clients=n + 1,
        pool="p",
        targets=["scratch"],
        engine="fio",
        workload=Workload(),
    )
    return Item(id=work.item_id, run_id=RUN, step=0, client=n, state=state, work_item=work)


# ---- runs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frm", "to"), [(frm, to) for frm, tos in RUN_MOVES.items() for to in sorted(tos)]
)
def test_every_run_edge_is_allowed(frm: RunState, to: RunState) -> None:
    run = run_in(frm)
    run.move(to)
    assert run.state == to


@pytest.mark.parametrize("state", list(RunState))
def test_a_run_moving_to_its_own_state_is_no_move(state: RunState) -> None:
    run = run_in(state)
    run.move(state)
    assert run.state == state


@pytest.mark.parametrize(
    ("done", "to"), [(done, to) for done in sorted(FINISHED_RUN) for to in RunState if to != done]
)
def test_a_finished_run_refuses_every_other_state(done: RunState, to: RunState) -> None:
    run = run_in(done)
    with pytest.raises(IllegalMove, match=f"run {RUN}: {done} -> {to}"):
        run.move(to)
    assert run.state == done


def test_a_bad_run_edge_is_refused() -> None:
    # A waiting run is admitted (queued) before anything else can happen to it but a cancel
    # (or a failure that is not its own: an internal error, a void creation).
    for to in (RunState.RUNNING, RunState.PROVISIONING, RunState.COMPLETED):
        with pytest.raises(IllegalMove):
            run_in(RunState.WAITING).move(to)


@given(
    states=st.lists(st.sampled_from(ItemState), max_size=8),
    cancel_requested=st.booleans(),
    finished=st.booleans(),
    finalized=st.booleans(),
    current=st.sampled_from([RunState.QUEUED, RunState.RUNNING, RunState.PROVISIONING]),
)
def test_what_an_admitted_run_derives_is_a_legal_move(
    states: list[ItemState],
    cancel_requested: bool,
    finished: bool,
    finalized: bool,
    current: RunState,
) -> None:
    """An admitted run not finished yet (queued, running, or held while its pool grows):
    whatever its items say, the state derived for it is one it may move to."""
    assume(not finalized or finished)  # aggregates are stored only once nothing runs
    # Finished: every item ended, or the run was cancelled (its agents still stopping).
    assume(not finished or cancel_requested or all(s in TERMINAL for s in states))
    items = [item_in(s, n) for n, s in enumerate(states)]
    to = derive_run_state(
        items,
        cancel_requested=cancel_requested,
        finalized=finalized,
        finished=finished,
        admitted=True,
    )
    run = run_in(current)
    run.move(to)
    assert run.state == to


@given(cancel_requested=st.booleans(), admitted=st.booleans())
def test_what_a_waiting_run_derives_is_a_legal_move(cancel_requested: bool, admitted: bool) -> None:
    # Admitted meanwhile only if cancelled as it was admitted (it keeps reading "waiting"
    # until the cancel is applied); no items yet.
    assume(not admitted or cancel_requested)
    to = derive_run_state(
        [],
        cancel_requested=cancel_requested,
        finalized=False,
        finished=cancel_requested,
        admitted=admitted,
    )
    run = run_in(RunState.WAITING)
    run.move(to)
    assert run.state == to


@given(states=st.lists(st.sampled_from(sorted(TERMINAL)), min_size=1, max_size=8))
def test_a_finished_run_derives_its_own_state_again(states: list[ItemState]) -> None:
    """Once every item has ended, deriving again (a later call, the timer) gives the state
    the run finished with: it never has to leave a finished state."""
    items = [item_in(s, n) for n, s in enumerate(states)]
    first = derive_run_state(
        items, cancel_requested=False, finalized=False, finished=True, admitted=True
    )
    later = derive_run_state(
        items, cancel_requested=False, finalized=True, finished=True, admitted=True
    )
    if first == RunState.FAILED:
        assert later == RunState.FAILED
    else:
        assert first == RunState.RUNNING and later == RunState.COMPLETED


# ---- the run's outbox -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frm", "to"), [(frm, to) for frm, tos in DELIVERY_MOVES.items() for to in sorted(tos)]
)
def test_every_delivery_edge_is_allowed(frm: DeliveryState, to: DeliveryState) -> None:
    d = Delivery(state=frm)
    d.move(to)
    assert d.state == to


@pytest.mark.parametrize(
    ("frm", "to"),
    [
        (frm, to)
        for frm in DeliveryState
        for to in DeliveryState
        if to != frm and to not in DELIVERY_MOVES[frm]
    ],
)
def test_every_other_delivery_edge_is_refused(frm: DeliveryState, to: DeliveryState) -> None:
    d = Delivery(state=frm)
    with pytest.raises(IllegalMove, match=f"delivery: {frm} -> {to}"):
        d.move(to)
    assert d.state == frm


def test_stored_deliveries_keep_their_strings() -> None:
    for value in ("waiting", "pending", "sent", "failed"):
        d = Delivery.model_validate({"state": value, "attempts": 2})
        assert d.state == DeliveryState(value) and d.state == value
        assert d.model_dump(mode="json")["state"] == value


# ---- the step's start barrier ---------------------------------------------------------------


def reopened(s: Step) -> None:
    s.reopen()


# The one method behind each edge of STEP_MOVES (the table and the methods agree).
STEP_EDGES: dict[tuple[StepState, StepState], Callable[[Step], object]] = {
    (StepState.PLANNED, StepState.OPEN): lambda s: s.mark_sent(),
    (StepState.PLANNED, StepState.STARTED): lambda s: s.start(9_000),
    (StepState.PLANNED, StepState.FAILED): lambda s: s.fail("step 0 gave no result"),
    (StepState.OPEN, StepState.STARTED): lambda s: s.start(9_000),
    (StepState.OPEN, StepState.FAILED): lambda s: s.fail("1 of 2 clients claimed within 30 s"),
    (StepState.STARTED, StepState.OPEN): reopened,
}


def test_the_step_table_and_its_methods_agree() -> None:
    edges = {(frm, to) for frm, tos in STEP_MOVES.items() for to in tos}
    assert edges == {*STEP_EDGES, (StepState.STARTED, StepState.PLANNED)}


@pytest.mark.parametrize(("frm", "to"), sorted(STEP_EDGES))
def test_every_step_edge_is_taken_by_its_method(frm: StepState, to: StepState) -> None:
    step = step_in(frm)
    STEP_EDGES[(frm, to)](step)
    assert step.state == to


def test_a_step_reopened_before_it_was_marked_sent_is_planned_again() -> None:
    # A crash between sending a step's items and marking it sent: its lone client started
    # and was retried; the step is marked when the lifecycle sends it again.
    step = Step(id=f"{RUN}.s0", run_id=RUN, step=0, clients=1)
    step.start(5_000)
    step.reopen()
    assert step.state == StepState.PLANNED


def test_the_step_state_is_read_not_stored() -> None:
    step = step_in(StepState.STARTED)
    assert "state" not in step.doc()
    assert Step.model_validate(step.doc()).state == StepState.STARTED


def test_a_step_fails_only_before_it_starts_and_only_once() -> None:
    started = step_in(StepState.STARTED)
    assert started.fail("too late") is False
    assert started.state == StepState.STARTED and started.failed_reason is None

    step = step_in(StepState.OPEN)
    assert step.fail("1 of 2 clients claimed within 30 s") is True
    assert step.fail("another reason") is False
    assert step.failed_reason == "1 of 2 clients claimed within 30 s"


def test_a_failed_or_started_step_does_not_start_again() -> None:
    for state in (StepState.FAILED, StepState.STARTED):
        step = step_in(state)
        before = step.start_at_ms
        with pytest.raises(IllegalMove, match=f"step {RUN}.s0: {state} -> started"):
            step.start(99_000)
        assert step.start_at_ms == before


def test_a_failed_step_cannot_be_reopened() -> None:
    with pytest.raises(IllegalMove):
        step_in(StepState.FAILED).reopen()


def test_reopen_gives_a_fresh_barrier_from_the_next_claim() -> None:
    step = step_in(StepState.STARTED, clients=1)
    step.ready_shards = [0]
    step.reopen()
    assert step.state == StepState.OPEN
    assert (step.start_at_ms, step.first_claim_ms, step.ready_shards) == (None, None, [])
    assert step.barrier_round == 1  # the round before's shards are left behind
    step.claimed(50_000, 30_000)
    assert (step.first_claim_ms, step.deadline_ms) == (50_000, 80_000)


def test_claims_keep_the_first_deadline() -> None:
    step = step_in(StepState.OPEN)
    step.claimed(1_000, 30_000)
    step.claimed(7_000, 30_000)  # redelivered (its readiness: core.runs.barrier.leave)
    assert (step.first_claim_ms, step.deadline_ms) == (1_000, 31_000)


def test_only_a_started_step_s_instant_moves() -> None:
    step = step_in(StepState.STARTED, clients=1)
    step.move_start(12_000)
    assert step.start_at_ms == 12_000 and step.state == StepState.STARTED
    for state in (StepState.PLANNED, StepState.OPEN, StepState.FAILED):
        with pytest.raises(IllegalMove):
            step_in(state).move_start(12_000)


def test_a_step_failed_before_it_was_marked_sent_stays_failed() -> None:
    step = step_in(StepState.PLANNED)
    step.fail("its pool did not grow")
    step.mark_sent()  # a racing send went out before it saw the failure
    assert step.enqueued and step.state == StepState.FAILED
