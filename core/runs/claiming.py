"""Two questions a claim asks (over the repositories), each in O(1) reads whatever the
number of clients (issue 29: a claim read every item of the run, and every early claim of a
queued run advanced it, sending its first step again while it was still going out)."""

from __future__ import annotations

from core.errors import NotFound
from core.models import WorkItem
from core.models.holder import AgentRef
from core.models.state import DeliveryState, RunState
from core.models.stored import Run, Step
from core.ports import Store


def held_sibling(store: Store, work: WorkItem, step: Step, agent: AgentRef) -> str | None:
    """Another item of the step this agent holds: the step records who claimed each item,
    and only those this agent claimed are read (none, as a rule), never the whole run."""
    for item_id, holder in step.claimed_by.items():
        if item_id == work.item_id or holder != agent.id:
            continue
        try:
            d = store.items.get_item(work.run_id, item_id)
        except NotFound:
            continue
        if d.agent_id == agent.id and d.held:
            return d.id
    return None


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
