"""The agents' protocol up to the start: claim, ready and the start barrier (pure logic
over the repositories; the reports while an item runs and its result: core.runs.agent_reports).

Every report is accepted only from the agent holding the item (core.models.holder), in a
state where it makes sense, and each decision is taken inside the compare-and-swap on the
document as freshly read for the write: a racing or forged report changes nothing. A report
changes only its item and its step; when an item ends (or a queued run's first item is
claimed) the run is advanced (core.runs.lifecycle), the one place where runs move on.

A step of N clients: N distinct agents claim its items, lay out their files, report ready,
and are given one common start instant (the start barrier). A step whose clients do not
all claim and get ready within the barrier timeout fails with the count (an agent polling
past the deadline fails it and ends its own item; the lifecycle fails the others), and its
agents are released.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from core.errors import NotFound
from core.models import WorkItem
from core.models.holder import AgentRef, holds, refuse
from core.models.state import ItemState
from core.models.stored import Item, Rebarrier, Run, Step
from core.runs.barrier import join, leave, settle
from core.runs.barrier_timing import BARRIER_LEAD_MS, REJOIN_LATE_MS, barrier_lead_ms
from core.runs.claiming import advances_run, held_sibling, mark_claimed, shows_queued
from core.runs.lifecycle import Lifecycle
from core.runs.timer import advance_or_defer, barrier_reason, fail_barrier
from core.timestamps import iso_ms

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClaimDecision:
    action: Literal["run", "drop", "release"]  # release: hand the message back
    reason: str = ""


@dataclass(frozen=True)
class BarrierDecision:
    status: Literal["wait", "go", "abort"]
    start_at_ms: int | None = None
    reason: str = ""
    # With "go" at the step's common instant: when the API set it (Step.start_set_ms).
    set_at_ms: int | None = None


def _go(step: Step) -> BarrierDecision:
    """Go at the step's common instant, stamped with when it was set."""
    return BarrierDecision("go", start_at_ms=step.start_at_ms, set_at_ms=step.start_set_ms)


class AgentProtocol:
    def __init__(
        self,
        lifecycle: Lifecycle,
        *,
        max_deliveries: int = 5,
        barrier_lead_ms: int = BARRIER_LEAD_MS,
        rejoin_late_ms: int = REJOIN_LATE_MS,
    ) -> None:
        self.life = lifecycle
        self.store = lifecycle.store
        self.max_deliveries = max_deliveries
        self.barrier_lead_ms = barrier_lead_ms
        self.rejoin_late_ms = rejoin_late_ms

    def lead_ms(
        self, clients: int, round_trips: list[int] | None = None, held: bool = False
    ) -> int:
        return barrier_lead_ms(clients, round_trips or [], self.barrier_lead_ms, held=held)

    def _end(self, run_id: str, item: str, to: ItemState, reason: str) -> None:
        moved = self.life.update_item(run_id, item, lambda d: None if d.end(to, reason) else False)
        if moved.ended:
            advance_or_defer(self.life, run_id)

    # ---- claim ------------------------------------------------------------------------

    def claim(
        self, work: WorkItem, *, agent: AgentRef, dequeue_count: int, message_id: str = ""
    ) -> ClaimDecision:
        """Decide whether an agent that just received ``work`` should take it.

        Of several agents racing for one item (copies of its message sent twice), exactly
        one is told to run: the decision is made in the item's compare-and-swap."""
        try:
            run = self.store.runs.get(work.run_id)
            doc = self.store.items.get_item(work.run_id, work.item_id)
            step = self.store.items.get_step(work.run_id, work.step)
        except NotFound:
            return ClaimDecision("drop", "unknown run or item")
        refusal = self._stale(doc, agent, dequeue_count, message_id) or self._ended(
            work, run, step, doc, dequeue_count
        )
        if refusal:
            return refusal
        sibling = held_sibling(self.store, work, agent)
        if sibling is not None:
            return ClaimDecision("release", f"{agent.id} already holds {sibling}")
        return self._take(work, doc, step, agent, dequeue_count, message_id, run)

    def _stale(
        self, doc: Item, agent: AgentRef, dequeue_count: int, message_id: str
    ) -> ClaimDecision | None:
        """A message for an item that no longer needs this agent: dropped, nothing ends."""
        if doc.ended:
            return ClaimDecision("drop", f"item already {doc.state}")
        if doc.state in (ItemState.READY, ItemState.RUNNING) and self._finish_stored(doc):
            return ClaimDecision("drop", "its result is stored already")
        if _held_by_another(doc, agent, message_id, dequeue_count):
            # A copy of a message someone else holds: it ends nothing (decided again below,
            # inside the compare-and-swap, for the copy that might still take the item).
            return ClaimDecision("drop", f"duplicate message: {doc.agent_id} holds it")
        return None

    def _ended(
        self, work: WorkItem, run: Run, step: Step, doc: Item, dequeue_count: int
    ) -> ClaimDecision | None:
        """The item ends here, with its reason: its run was cancelled, its step failed, or
        its message came back more often than an item may be delivered."""
        if run.cancel_requested:
            reason, state = "run cancelled", ItemState.CANCELLED
        elif step.failed_reason:
            reason, state = step.failed_reason, ItemState.FAILED
        elif dequeue_count > self.max_deliveries:
            last = doc.errors[-1].message if doc.errors else "no error reported"
            reason = (
                f"moved to the poison queue after {dequeue_count - 1} deliveries; "
                f"last error: {last}"
            )
            state = ItemState.FAILED
            self.life.queue.send_poison(work.pool, work.model_dump_json())
        else:
            return None
        self._end(work.run_id, work.item_id, state, reason)
        return ClaimDecision("drop", reason)

    def _finish_stored(self, doc: Item) -> bool:
        """Its holder stored its result, and the item was not marked completed (the API
        died in between, or the answer was lost): complete it now, rather than hand it to
        another agent to measure again under a result that is not its own."""
        try:
            result = self.store.results.get(doc.run_id, doc.id)
        except NotFound:
            return False
        holder = result.agent_id

        def done(d: Item) -> bool | None:
            if d.state not in (ItemState.READY, ItemState.RUNNING) or d.agent_id != holder:
                return False
            d.move(ItemState.COMPLETED)
            return None

        after = self.life.update_item(doc.run_id, doc.id, done)
        if after.state != ItemState.COMPLETED or after.agent_id != holder:
            return False
        self.life.advance(doc.run_id)
        return True

    def _take(
        self,
        work: WorkItem,
        doc: Item,
        step: Step,
        agent: AgentRef,
        dequeue_count: int,
        message_id: str,
        run: Run,
    ) -> ClaimDecision:
        now = self.life.now_ms()
        started_together = step.start_at_ms is not None and step.clients > 1
        verdict: list[ClaimDecision] = []
        was_ready: list[bool] = []

        def take(d: Item) -> bool | None:
            was_ready[:] = [d.state == ItemState.READY]
            if d.ended:
                verdict[:] = [ClaimDecision("drop", f"item already {d.state}")]
                return False
            if _held_by_another(d, agent, message_id, dequeue_count):
                verdict[:] = [ClaimDecision("drop", f"duplicate message: {d.agent_id} holds it")]
                return False
            if d.held and not holds(d, agent) and started_together:
                # The holder's lease ran out during a started step: it cannot rejoin.
                reason = f"client {d.agent_id} stopped renewing its lease during the step"
                d.end(ItemState.FAILED, reason)
                verdict[:] = [ClaimDecision("drop", reason)]
                return None
            d.move(
                ItemState.CLAIMED,
                agent_id=agent.id,
                principal=agent.principal,
                message_id=message_id,
                attempts=dequeue_count,
                claimed_at=iso_ms(now),
                heartbeat_at=iso_ms(now),
                start_at_ms=None,  # an instant of its own is given again if needed
            )
            verdict[:] = [ClaimDecision("run")]
            return None

        def open_barrier(s: Step) -> None:
            if s.clients == 1 and s.start_at_ms:
                s.reopen()  # a retry: a fresh barrier
            s.claimed(now, work.barrier_timeout_s * 1000)

        # Tried on the item as read above (a copy changed since fails its swap and is read
        # again): one read less per claim, in a step's burst of claims (issue 29.3).
        after = self.life.update_item(work.run_id, work.item_id, take, read=doc)
        if verdict[0].action == "run":
            # Written by the first claim only (and a lone client's retry): tried on the step
            # as read, no write when nothing changes, but a read to confirm it (the copy may
            # be stale: cas.update).
            step = self.life.update_step(work.run_id, work.step, open_barrier, read=step)
            mark_claimed(self.store, work, agent)
            if was_ready[0]:  # claimed again while its barrier waits: ready again first
                leave(self.life, step, after.client)
        # The run's first claim (it now shows as running) or an item that ended: the run
        # moves on, in the one place runs do (core.runs.lifecycle.advance).
        if after.ended:
            advance_or_defer(self.life, work.run_id)  # the item is failed: the claim is answered
        elif (
            verdict[0].action == "run" and advances_run(step, now) and shows_queued(self.store, run)
        ):
            self.life.advance(work.run_id)
        return verdict[0]

    # ---- the start barrier --------------------------------------------------------------

    def ready(
        self,
        run_id: str,
        item_id: str,
        agent: AgentRef,
        rtt_ms: int | None = None,
        *,
        held: bool = False,
    ) -> BarrierDecision:
        """The agent has laid out its files and waits for the step's start instant (``held``:
        in held barrier calls, which a shorter lead covers, core.runs.barrier_timing).

        Readiness is recorded on the item, then in the step's barrier shard; the report
        that completes the set sets the start instant, in the step's compare-and-swap, after
        checking every shard (core.runs.barrier): no two concurrent readies can both miss
        the moment the step became complete.
        """
        return self.readied(run_id, item_id, agent, rtt_ms, held=held)[0]

    def readied(
        self, run_id: str, item_id: str, agent: AgentRef, rtt_ms: int | None, *, held: bool
    ) -> tuple[BarrierDecision, Item]:
        """:meth:`ready`, and the item as written: a ready report held as a barrier call is
        answered again on it when its step moves (:meth:`decide`)."""
        refused: list[bool] = []

        def mark(d: Item) -> bool | None:
            waiting = d.state in (ItemState.CLAIMED, ItemState.READY)
            refused[:] = [not holds(d, agent) or not waiting]
            if refused[0] or d.state == ItemState.READY:
                return False  # refused, or a retry of a ready already recorded
            d.move(ItemState.READY, ready_at=iso_ms(self.life.now_ms()), rtt_ms=rtt_ms)
            return None

        doc = self.life.update_item(run_id, item_id, mark)
        if refused[0]:
            if holds(doc, agent) and doc.ended:
                return _ended(doc), doc
            raise refuse(doc, agent, "ready")
        step = self.store.items.get_step(run_id, doc.step)
        now = self.life.now_ms()
        step = join(self.life, step, doc.client, agent.id, doc.rtt_ms, self.lead_ms, held=held)
        if step.start_at_ms is not None and step.start_at_ms > now:
            lead, n = step.start_at_ms - now, step.clients
            log.info("run %s step %d: all %d ready, start in %d ms", run_id, step.step, n, lead)
        return self._barrier(run_id, doc, agent, step), doc

    def barrier(self, run_id: str, item_id: str, agent: AgentRef) -> BarrierDecision:
        """An agent's poll while it waits: two reads, its item (only its holder is
        answered) and its step (small: the clients' facts are on their items)."""
        return self.polled(run_id, item_id, agent)[0]

    def polled(self, run_id: str, item_id: str, agent: AgentRef) -> tuple[BarrierDecision, Item]:
        """A poll, and the item as read for it: a held call (core.runs.barrier_watch) is
        answered again on it when its step moves (:meth:`decide`)."""
        doc = self.store.items.get_item(run_id, item_id)
        if not holds(doc, agent) or doc.state == ItemState.QUEUED:
            raise refuse(doc, agent, "barrier")
        return self._barrier(run_id, doc, agent), doc

    def decide(self, doc: Item, agent: AgentRef, step: Step | None) -> BarrierDecision:
        """A held call's answer once its step moved: on the step as the watch just read it
        and the item as read when the call came, its holder checked then, so that waking
        N calls reads nothing more (issue 29.3: at 32 clients re-reading each item held the
        answers back by up to 0.8 s). What a barrier answer reads of the item changes only
        by its holder's own calls while it waits (an instant of its own, a failure report)
        or with its step (failed: the step says so); a run cancelled meanwhile is heard at
        the next heartbeat, as after any "go"."""
        if step is not None and step.step != doc.step:
            step = None
        return self._barrier(doc.run_id, doc, agent, step)

    def _barrier(
        self, run_id: str, doc: Item, agent: AgentRef, step: Step | None = None
    ) -> BarrierDecision:
        """``step``: the step as its caller just wrote it (else read here)."""
        if doc.ended:
            return _ended(doc)
        if doc.start_at_ms is not None:  # an instant of its own (see _rebarrier)
            return BarrierDecision("go", start_at_ms=doc.start_at_ms)
        if step is None:
            step = self.store.items.get_step(run_id, doc.step)
        if step.failed_reason:
            return BarrierDecision("abort", reason=step.failed_reason)
        if step.start_at_ms is not None:
            late_ms = self.life.now_ms() - step.start_at_ms
            if late_ms <= self.rejoin_late_ms:
                return _go(step)
            return self._rebarrier(run_id, doc, step, agent, late_ms)
        if step.deadline_ms is None or self.life.now_ms() <= step.deadline_ms:
            return BarrierDecision("wait")
        # Past the deadline: every client ready, unrecorded (a crash between two writes),
        # starts it now; else this call fails the step and ends its own item; the run's
        # advance fails the step's other items (core.runs.lifecycle).
        step = settle(self.life, step, self.lead_ms)
        if step.start_at_ms is not None:
            return _go(step)
        reason = barrier_reason(self.store, step)
        step = fail_barrier(self.life, step, reason)
        if step.start_at_ms is not None:  # completed just before the deadline
            return _go(step)
        failed = step.failed_reason or reason
        self._end(run_id, doc.id, ItemState.FAILED, failed)
        return BarrierDecision("abort", reason=failed)

    def _rebarrier(
        self, run_id: str, item: Item, step: Step, agent: AgentRef, late_ms: int
    ) -> BarrierDecision:
        """This client hears "go" after its step's instant has passed: it was redelivered,
        or could not reach the API while it waited (after a 41 s outage a client started
        58,808 ms after the others). Told the old instant it would start at once, as if
        together with clients that are done by now. It gets a start instant of its own
        instead, recorded on its item with why; the step's common instant stays, so the
        aggregation sees how far from it this client started. A client alone in its step
        moves the step's instant with it."""
        now = self.life.now_ms()
        assert step.start_at_ms is not None
        common = step.start_at_ms
        item_id, trip = item.id, item.rtt_ms
        fresh = now + self.lead_ms(1, None if trip is None else [trip])
        if step.clients == 1:

            def move(s: Step) -> bool | None:
                if s.start_at_ms != common:
                    return False  # a retry of this poll moved it already
                s.move_start(fresh)
                return None

            fresh = self.life.update_step(run_id, step.step, move).start_at_ms or fresh
        note = Rebarrier(at_ms=now, step_start_at_ms=common, late_ms=late_ms, start_at_ms=fresh)
        given: list[bool] = []

        def own(d: Item) -> bool | None:
            given[:] = [holds(d, agent) and d.held]
            if not given[0] or d.start_at_ms is not None:
                return False
            d.start_at_ms = fresh if step.clients > 1 else None
            d.rebarriered = note
            return None

        doc = self.life.update_item(run_id, item_id, own)
        if not given[0]:
            raise refuse(doc, agent, "barrier")
        log.warning(
            "item %s heard its step's start %d ms late: own instant %d", item_id, late_ms, fresh
        )
        return BarrierDecision("go", start_at_ms=doc.start_at_ms or fresh)


def _held_by_another(d: Item, agent: AgentRef, message_id: str, dequeue_count: int) -> bool:
    """Whether another agent holds the item and this delivery may not take it over. Only a
    later delivery of the holder's own message may: the queue gave it out again because the
    holder's lease ran out (a higher dequeue count than the holder's claim)."""
    if not d.held or holds(d, agent):
        return False
    redelivered = d.message_id == message_id and dequeue_count > d.attempts
    return not redelivered


def _ended(doc: Item) -> BarrierDecision:
    return BarrierDecision("abort", reason=doc.reason or f"item {doc.state}")
