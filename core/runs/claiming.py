"""Two questions a claim asks (over the repositories), each in O(1) reads whatever the
number of clients (issue 29: a claim read every item of the run, and every early claim of a
queued run advanced it, sending its first step again while it was still going out)."""

from __future__ import annotations

from core.errors import NotFound
from core.models import WorkItem
from core.models.barrier_shard import ClaimMark, claim_mark_id
from core.models.holder import AgentRef
from core.models.state import DeliveryState, RunState
from core.models.stored import Run, Step
from core.ports import Store

# A claim this long after its step's first one advances a run still shown queued, should the
# first claim have failed to (its API instance died between the two writes).
ADVANCE_AFTER_FIRST_CLAIM_MS = 10_000


def held_sibling(store: Store, work: WorkItem, agent: AgentRef) -> str | None:
    """Another item of the step this agent holds: the agent's claim mark in the step names
    the item it claimed last, and only that item is read (none, as a rule), never the
    whole run."""
    try:
        mark = store.items.get_claim_mark(
            work.run_id, claim_mark_id(work.run_id, work.step, agent.id)
        )
        if mark.item_id == work.item_id:
            return None
        d = store.items.get_item(work.run_id, mark.item_id)
    except NotFound:
        return None
    return d.id if d.agent_id == agent.id and d.held else None


def mark_claimed(store: Store, work: WorkItem, agent: AgentRef) -> None:
    """The agent took the item: its claim mark in the step names it."""
    mark_id = claim_mark_id(work.run_id, work.step, agent.id)
    mark = ClaimMark(
        id=mark_id, run_id=work.run_id, step=work.step, agent_id=agent.id, item_id=work.item_id
    )
    store.items.put_claim_mark(mark)


def shows_queued(store: Store, run: Run) -> bool:
    """Whether a claim must advance a queued run (to show it running). Not while its first
    step is still being sent: that sender advances it once every message is out and sees
    the claim then (it rereads the items after marking the step sent, and the claim's item
    was written before the run is read again here)."""
    if run.state != RunState.QUEUED:
        return False
    if run.delivery.state != DeliveryState.SENT:
        run = store.runs.get(run.id)
    return run.state == RunState.QUEUED and run.delivery.state == DeliveryState.SENT


def advances_run(step: Step, now_ms: int) -> bool:
    """Whether a claim at ``now_ms`` of ``step`` (as the claim's compare-and-swap left it)
    advances a queued run to show it running: the claim that opened the step's barrier,
    not every claim of its burst (issue 29.3: the 32 claims of a step, all reading the run
    while it was still queued, each advanced it, each with a query of the run's every
    document); a claim long after the first too, should the first have failed to."""
    first = step.first_claim_ms
    return first is None or first == now_ms or now_ms - first >= ADVANCE_AFTER_FIRST_CLAIM_MS
