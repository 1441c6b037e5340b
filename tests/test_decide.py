"""What happens next to a run, as a table (core.runs.decide, pure): one case per row of the
module's table and the edges between rows, then properties over any run, steps and items."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.models import WorkItem, Workload
from core.models.state import INTERNAL_ERROR_ATTEMPTS, TERMINAL, DeliveryState, ItemState, RunState
from core.models.stored import Delivery, Item, Run, Step
from core.runs.commit import DECIDE_GRACE_MS
from core.runs.decide import (
    RECHECK_MS,
    Action,
    CloseOutbox,
    FailItems,
    Finalize,
    Judge,
    Send,
    Settle,
    Wait,
    decide,
    settling,
)

RUN = "r-" + "d" * 32
CREATED_MS = 1_000_000
NOW = CREATED_MS + DECIDE_GRACE_MS + 1  # past the commit point's grace
EARLY = CREATED_MS + 1  # within it

D = DeliveryState
I = ItemState  # noqa: E741 (the table reads better with one letter)


def make_run(**fields: Any) -> Run:
    """An admitted, accepted run whose first step was sent, changed by ``fields``."""
    delivery = fields.pop("delivery", D.SENT)
    doc: dict[str, Any] = {
        "id": RUN,
        "created_at": "2031-01-01T00:00:00Z",
        "created_ms": CREATED_MS,
        "request": {"target": "scratch", "pool": "p"},
        "workload": {},
        "comparison_key": "k",
        "target": "scratch",
        "targets": ["scratch"],
        "pool": "p",
        "step_count": 2,
        "items_total": 2,
        "requested_by": {"name": "t", "role": "admin"},
        "body_hash": "h",
        "accepted": True,
        "state": RunState.RUNNING,
        "delivery": Delivery(state=delivery),
        **fields,
    }
    return Run.model_validate(doc)


def make_step(number: int, sent: bool = True, failed: str | None = None) -> Step:
    return Step(
        id=f"{RUN}.s{number}",
        run_id=RUN,
        step=number,
        clients=1,
        enqueued=sent,
        failed_reason=failed,
    )


def make_item(step: int, state: ItemState, reason: str | None = None, client: int = 0) -> Item:
    item_id = f"{RUN}.s{step}.c{client}"
    work = WorkItem(
        run_id=RUN,
        item_id=item_id,
        step=step,
        client=client,
        clients=client + 1,
        pool="p",
        targets=["scratch"],
        engine="fio",
        workload=Workload(),
    )
    return Item(
        id=item_id, run_id=RUN, step=step, client=client, state=state, reason=reason, work_item=work
    )


@dataclass(frozen=True)
class Case:
    id: str
    run: dict[str, Any]
    steps: Sequence[tuple[int, bool, str | None]]  # (number, sent, failed reason)
    items: Sequence[tuple[int, ItemState, str | None]]  # (step, state, reason)
    action: Action
    now: int = NOW
    creator: bool = False


StepSpec = tuple[int, bool, str | None]
TWO_PLANNED: list[StepSpec] = [(0, False, None), (1, False, None)]
FIRST_SENT: list[StepSpec] = [(0, True, None), (1, False, None)]
BOTH_SENT: list[StepSpec] = [(0, True, None), (1, True, None)]
BARRIER = "1 of 2 claimed within 30 s"
NOT_SENT: dict[str, Any] = {"delivery": D.PENDING, "state": RunState.QUEUED}
UNDECIDED: dict[str, Any] = {
    "accepted": None,
    "accept_by_s": 2_000_000,
    "landed_s": 1_000,
}  # stored in time
IN_LINE: dict[str, Any] = {"admitted": False, "delivery": D.WAITING, "state": RunState.WAITING}

CASES = [
    # 1: a failed step's items fail with it, before anything else.
    Case(
        "1 a failed step's items that have not ended fail with it",
        {},
        [(0, True, BARRIER), (1, False, None)],
        [(0, I.CLAIMED, None), (0, I.COMPLETED, None)],
        FailItems(((f"{RUN}.s0.c0", BARRIER),)),
    ),
    Case(
        "1 even with its first step's delivery pending",
        NOT_SENT,
        [(0, True, BARRIER), (1, False, None)],
        [(0, I.QUEUED, None)],
        FailItems(((f"{RUN}.s0.c0", BARRIER),)),
    ),
    # 2: waiting in line, its creation undecided.
    Case("2 in line, undecided, within the grace: wait", {**IN_LINE, **UNDECIDED},
         TWO_PLANNED, [], Wait(), now=EARLY),
    Case("2 in line, undecided, past the grace: accepted", {**IN_LINE, "accepted": None},
         TWO_PLANNED, [], Judge(True)),
    Case("2 in line, stored after its answer's deadline: void",
         {**IN_LINE, "accepted": None, "accept_by_s": 100, "landed_s": 101},
         TWO_PLANNED, [], Judge(False), now=EARLY),
    Case("2 in line, accepted: it waits as it is (settled, not finished)", IN_LINE,
         TWO_PLANNED, [], Settle(False, False, False, ())),
    Case("2 in line, undecided but cancelled: settled, finished, owing nothing",
         {**IN_LINE, "accepted": None, "cancel_requested": True},
         TWO_PLANNED, [], Settle(True, False, False, ())),
    # 3-5: admitted, its first step not sent (the outbox).
    Case("3 cancelled before its first step went out: close the outbox",
         {**NOT_SENT, "cancel_requested": True}, TWO_PLANNED, [], CloseOutbox()),
    Case("4 undecided, within the grace: wait (its creator may void it)",
         {**NOT_SENT, **UNDECIDED}, TWO_PLANNED, [], Wait(), now=EARLY),
    Case("4 undecided, its creator: accepted", {**NOT_SENT, "accepted": None},
         TWO_PLANNED, [], Judge(True), now=EARLY, creator=True),
    Case("4 undecided, past the grace: accepted", {**NOT_SENT, "accepted": None},
         TWO_PLANNED, [], Judge(True)),
    Case("4 void: void again (what it took is freed)", {**NOT_SENT, "accepted": False},
         TWO_PLANNED, [], Judge(False)),
    Case("5 accepted: send its first step", NOT_SENT, TWO_PLANNED, [], Send(0)),
    Case("5 a send cut half-way (items out, step marked) is finished",
         NOT_SENT, FIRST_SENT, [(0, I.QUEUED, None)], Send(0)),
    # 6: a later step, once the ones before it ended.
    Case("5 a later step failed before the first went out: not sent, finalized",
         NOT_SENT, [(0, False, None), (1, False, BARRIER)], [], Finalize()),
    Case("6 step 0 ended: send step 1", {}, FIRST_SENT, [(0, I.COMPLETED, None)], Send(1)),
    Case("6 a creation not yet accepted: no step 1 (settled, not finished)",
         {"accepted": None, "accept_by_s": 2_000_000, "landed_s": 1_000}, FIRST_SENT,
         [(0, I.COMPLETED, None)], Settle(False, False, False, ())),
    Case("6 step 1's items exist (a send cut half-way): sent again, in full", {},
         FIRST_SENT, [(0, I.COMPLETED, None), (1, I.QUEUED, None)], Send(1)),
    Case("6 step 0 still running: settled, not finished", {},
         FIRST_SENT, [(0, I.RUNNING, None)], Settle(False, False, False, ())),
    Case("6 a client of step 0 failed: step 1 is sent all the same", {},
         FIRST_SENT, [(0, I.FAILED, "disk full")], Send(1)),
    Case("6 a metadata phase failed: no later phase",
         {"workload": {"metadata": {"files_per_dir": 10}}},
         FIRST_SENT, [(0, I.FAILED, "disk full"), (0, I.COMPLETED, None)], Finalize()),
    Case("6 cancelled: no step 1; finished, owing nothing", {"cancel_requested": True},
         FIRST_SENT, [(0, I.CANCELLED, "run cancelled")], Settle(True, False, False, ())),
    Case("6 a run stored before the outbox (delivery waiting): no step sent", {
        "delivery": D.WAITING}, FIRST_SENT, [(0, I.COMPLETED, None)],
         Settle(False, False, False, ())),
    # 7: finished, owing its aggregates.
    Case("7 every step ran: finalize", {}, BOTH_SENT,
         [(0, I.COMPLETED, None), (1, I.COMPLETED, None)], Finalize()),
    Case("7 a later step failed at its barrier: finalize the steps that ran", {},
         [(0, True, None), (1, True, BARRIER)], [(0, I.COMPLETED, None), (1, I.FAILED, BARRIER)],
         Finalize()),
    # 8: settle.
    Case("8 finalized: settled, finished", {"finalized": True}, BOTH_SENT,
         [(0, I.COMPLETED, None), (1, I.COMPLETED, None)], Settle(True, True, False, ())),
    Case("8 its first step's delivery failed: finished, failed, owing nothing",
         {"delivery": D.FAILED}, TWO_PLANNED, [], Settle(True, False, True, ())),
    Case("8 given up on by the timer: owes nothing",
         {"internal_errors": INTERNAL_ERROR_ATTEMPTS}, BOTH_SENT,
         [(0, I.COMPLETED, None), (1, I.COMPLETED, None)], Settle(True, False, False, ())),
    Case("8 void: owes nothing", {"accepted": False}, BOTH_SENT,
         [(0, I.COMPLETED, None), (1, I.COMPLETED, None)], Settle(True, False, False, ())),
    Case("8 reasons: the failed steps' first, then the failed items'", {"finalized": True},
         [(0, True, None), (1, True, BARRIER)],
         [(0, I.FAILED, "disk full"), (1, I.FAILED, BARRIER)],
         Settle(True, True, False, (BARRIER, "disk full", BARRIER))),
]  # fmt: skip


def build(case: Case) -> tuple[Run, list[Step], list[Item]]:
    run = make_run(**case.run)
    steps = [make_step(n, sent, failed) for n, sent, failed in case.steps]
    clients: dict[int, int] = {}
    items = []
    for step, state, reason in case.items:
        clients[step] = clients.get(step, -1) + 1
        items.append(make_item(step, state, reason, clients[step]))
    return run, steps, items


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_table(case: Case) -> None:
    run, steps, items = build(case)
    assert decide(run, steps, items, case.now, creator=case.creator) == case.action


def test_every_row_has_a_case() -> None:
    rows = {c.id.split(" ", 1)[0] for c in CASES}
    assert rows == {str(n) for n in range(1, 9)}


# ---- settling: the change written, decided again on the fresh document ---------------------


def test_a_finished_run_becomes_due_at_once_while_it_owes_its_finish() -> None:
    run = make_run(state=RunState.RUNNING)
    items = [make_item(0, I.FAILED, "disk full")]
    settling(Settle(True, True, False, ("disk full",)), items, NOW)(run)
    assert (run.state, run.finished, run.error, run.due_ms) == (
        RunState.FAILED,
        True,
        "disk full",
        NOW,
    )


def test_a_run_still_running_is_looked_at_again_later() -> None:
    run = make_run(due_ms=NOW - 1)
    settling(Settle(False, False, False, ()), [make_item(0, I.RUNNING)], NOW)(run)
    assert run.due_ms == NOW + RECHECK_MS and run.state == RunState.RUNNING


def test_a_call_that_knows_less_than_the_one_that_finished_the_run_writes_nothing() -> None:
    run = make_run(finished=True, state=RunState.RUNNING)
    assert settling(Settle(False, False, False, ()), [], NOW)(run) is False


def test_a_settled_run_is_not_written_again() -> None:
    run = make_run(finished=True, finalized=True, state=RunState.COMPLETED)
    assert settling(Settle(True, True, False, ()), [], NOW)(run) is False


def test_a_failed_delivery_keeps_its_reason() -> None:
    run = make_run(delivery=D.FAILED, state=RunState.QUEUED, error="the queue ...")
    settling(Settle(True, False, True, ("other",)), [], NOW)(run)
    assert (run.state, run.error, run.due_ms) == (RunState.FAILED, "the queue ...", None)


# ---- properties over any run, steps and items -----------------------------------------------

runs = st.builds(
    lambda admitted, delivery, accepted, cancel, finalized, errors: make_run(
        admitted=admitted,
        delivery=delivery,
        accepted=accepted,
        cancel_requested=cancel,
        finalized=finalized,
        internal_errors=errors,
        state=RunState.RUNNING if admitted else RunState.WAITING,
    ),
    st.booleans(),
    st.sampled_from(DeliveryState),
    st.sampled_from([None, True, False]),
    st.booleans(),
    st.booleans(),
    st.sampled_from([0, INTERNAL_ERROR_ATTEMPTS]),
)
step_lists = st.lists(st.tuples(st.booleans(), st.sampled_from([None, BARRIER])), max_size=3)
item_lists = st.lists(st.tuples(st.integers(0, 2), st.sampled_from(ItemState)), max_size=6)


def world(
    run: Run, spec: list[tuple[bool, str | None]], raw: list[tuple[int, ItemState]]
) -> tuple[list[Step], list[Item]]:
    steps = [make_step(n, sent, failed) for n, (sent, failed) in enumerate(spec)]
    numbers = {s.step for s in steps}
    items = [
        make_item(step, state, "why" if state == I.FAILED else None, client)
        for client, (step, state) in enumerate(raw)
        if step in numbers
    ]
    return steps, items


@pytest.mark.slow  # about 6 s of generated cases: make test runs it, make unit does not
@given(run=runs, spec=step_lists, raw=item_lists, now=st.sampled_from([EARLY, NOW]))
def test_what_the_table_never_does(
    run: Run, spec: list[tuple[bool, str | None]], raw: list[tuple[int, ItemState]], now: int
) -> None:
    """Whatever the documents say: nothing is sent for a run not admitted, cancelled or not
    accepted, nor after a failed step; a step goes out only once the ones before it ended;
    only a run admitted, delivered, not cancelled and not void owes its aggregates; a failed
    step's items are failed first, and once they are, they are not named again."""
    steps, items = world(run, spec, raw)
    action = decide(run, steps, items, now)
    if isinstance(action, FailItems):
        failed = dict(action.items)
        items = [
            make_item(i.step, I.FAILED, failed[i.id], i.client) if i.id in failed else i
            for i in items
        ]
        action = decide(run, steps, items, now)
        assert not isinstance(action, FailItems)
    if isinstance(action, Send):
        assert run.admitted and run.accepted is True and not run.cancel_requested
        assert not any(s.failed_reason for s in steps)
        assert all(i.ended for i in items if i.step < action.step)
        assert action.step == 0 or run.delivery.state == D.SENT
    if isinstance(action, Finalize):
        assert run.admitted and not run.cancel_requested and not run.void and not run.gave_up
        assert run.delivery.state != D.FAILED and not run.finalized
        assert all(i.state in TERMINAL for i in items)
    if isinstance(action, Settle) and action.owes:
        assert run.finalized


@given(run=runs, spec=step_lists, raw=item_lists)
def test_the_same_documents_give_the_same_action(
    run: Run, spec: list[tuple[bool, str | None]], raw: list[tuple[int, ItemState]]
) -> None:
    steps, items = world(run, spec, raw)
    assert decide(run, steps, items, NOW) == decide(run, list(reversed(steps)), items, NOW)
