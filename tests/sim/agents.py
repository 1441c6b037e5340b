"""Simulated agents: each step of one does what agent/worker.py does next with its item
(receive, claim, ready, barrier polls, heartbeats, the result or a failure, the lease),
through the core services, and reacts to answers as the agent does: a 503 or a dead API is
retried with the same call, a refusal (409) ends its hold on the item."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from core.artifacts import pack
from core.errors import Conflict, LeaseLost, NotFound, StoreUnavailable, ValidationFailed
from core.models import WorkItem
from core.models.holder import AgentRef
from core.ports import Message
from core.runs.barrier_timing import barrier_poll_ms
from tests.sim.world import POOL, VISIBILITY_S, SimCrash, World

RETRY_DELAY_S = 1  # a failed attempt's message comes back this much later
HEARTBEAT_MS = 1000  # agent/lease.py HEARTBEAT_S
CANCELLED = "stopped: cancelled"
# What may answer an agent's call: a backing service down (503), the API dead (no answer),
# a refusal (409 not the holder, 404, 400).
RETRIED = (StoreUnavailable, SimCrash)
REFUSED = (Conflict, NotFound, ValidationFailed)


@cache
def _result_template() -> dict[str, Any]:
    from tests.conftest import result_from_capture

    item = WorkItem.model_validate(
        {
            "run_id": "r-" + "0" * 32,
            "item_id": "r-" + "0" * 32 + ".s0.c0",
            "step": 0,
            "client": 0,
            "clients": 1,
            "pool": POOL,
            "targets": ["a"],
            "engine": "fio",
            "workload": {"rw": "randread", "bs": "4k", "size": "8m", "runtime": 2},
        }
    )
    return result_from_capture(item, "template")


def result_of(work: WorkItem, agent_id: str) -> dict[str, Any]:
    doc = dict(_result_template())
    doc.update(
        id=work.item_id,
        item_id=work.item_id,
        run_id=work.run_id,
        step=work.step,
        client=work.client,
        agent_id=agent_id,
        targets=list(work.targets),
    )
    return doc


@dataclass
class SimAgent:
    id: str
    alive: bool = True
    msg: Message | None = None
    work: WorkItem | None = None
    phase: str = "idle"  # idle | claimed | waiting | go
    start_at_ms: int | None = None
    leased_at: float = 0.0  # when it last received or renewed its message
    ending: int | None = None  # how its item ends, chosen once fio is done (retried as is)
    # The faults' simulation beats, polls and reports once a step, with a short lease and a
    # lead sized without round trips. A count of what a run costs (bench/cost_count.py, its
    # steps shorter than a second) sets what agent/worker.py does instead: its lease thread
    # heartbeats every HEARTBEAT_MS from the claim on (agent/lease.py), it polls the barrier
    # every barrier_poll_ms, and reports its round trip with ready (agent.api_client).
    visibility_s: int = VISIBILITY_S  # the agent's visibility_timeout (agent/config.py)
    rtt_ms: int | None = None
    as_agent: bool = False
    # Artifacts it uploads before its result, as agent/worker.py does with those its result
    # cannot carry (bench/cost_count.py); the faults' simulation none. What they hold does
    # not count: an empty timeline (a finalizer that fetches it reads one), else its name.
    uploads: tuple[str, ...] = ()
    polled_at_ms: int = 0
    beat_at_ms: int = 0

    @property
    def ref(self) -> AgentRef:
        return AgentRef(self.id)

    def forget(self) -> None:
        self.msg, self.work, self.phase, self.start_at_ms = None, None, "idle", None
        self.ending, self.polled_at_ms, self.beat_at_ms = None, 0, 0

    # ---- one step -----------------------------------------------------------------------

    def step(self, world: World, api: int, crash_in: int | None, choice: int) -> str:
        """Do the next thing; returns what was done (for the trace)."""
        if not self.alive:
            return "dead"
        if self.msg is not None and world.clock() - self.leased_at >= self.visibility_s / 2:
            # What the lease thread does in the background (agent/lease.py); an agent not
            # stepped for a whole visibility timeout has lost it, as a stalled one would.
            lease = self._renew(world)
            if self.msg is None:
                return lease
        if self.phase == "idle":
            return self._poll(world, api, crash_in)
        assert self.work is not None
        work = self.work

        def call(f: Any) -> Any:
            return world.api_call(api, f, crash_in)

        try:
            if self.phase in ("claimed", "waiting"):
                return self._at_barrier(world, call, work)
            return self._running(world, call, choice)
        except RETRIED as e:
            return f"retry later ({type(e).__name__})"
        except REFUSED as e:
            return self._refused(world, call, e)

    def _at_barrier(self, world: World, call: Any, work: WorkItem) -> str:
        """Ready (once claimed), then barrier polls until "go"; as the agent, with a
        heartbeat a second and a poll every barrier_poll_ms."""
        beat = self._beat(world, call) if self.as_agent else ""
        if beat == CANCELLED:
            return beat
        if self.phase == "claimed":
            self.polled_at_ms = world.clock.ms()
            decision = call(lambda s: s.ready(work.run_id, work.item_id, self.ref, self.rtt_ms))
            return self._barrier(world, decision)
        if self.as_agent and world.clock.ms() - self.polled_at_ms < barrier_poll_ms(work.clients):
            return beat or "waits"
        self.polled_at_ms = world.clock.ms()
        decision = call(lambda s: s.barrier(work.run_id, work.item_id, self.ref))
        return self._barrier(world, decision)

    def _beat(self, world: World, call: Any) -> str:
        """A heartbeat, when one is due ("" when not): every step, or as the agent's lease
        thread beats (every HEARTBEAT_MS); a cancelled run stops the item."""
        assert self.work is not None
        work = self.work
        if self.as_agent and world.clock.ms() - self.beat_at_ms < HEARTBEAT_MS:
            return ""
        self.beat_at_ms = world.clock.ms()
        beat = call(lambda s: s.heartbeat(work.run_id, work.item_id, self.ref))
        if beat["cancel"]:
            call(lambda s: s.report_cancelled(work.run_id, work.item_id, self.ref))
            self._delete(world)
            return CANCELLED
        return "heartbeat"

    def _poll(self, world: World, api: int, crash_in: int | None) -> str:
        try:
            msg = world.queues.receive(POOL, self.visibility_s)
        except StoreUnavailable:
            return "queue down"
        if msg is None:
            return "nothing to do"
        self.leased_at = world.clock()
        work = WorkItem.model_validate_json(msg.content)
        try:
            decision = world.api_call(
                api,
                lambda s: s.claim(
                    work, agent=self.ref, dequeue_count=msg.dequeue_count, message_id=msg.id
                ),
                crash_in,
            )
        except RETRIED:
            return "claim unanswered: the message comes back"
        self.msg, self.work = msg, work
        if decision.action == "run":
            self.phase = "claimed"
            return f"claimed {work.item_id}"
        if decision.action == "drop":
            self._delete(world)
            return f"dropped {work.item_id}: {decision.reason}"
        self._hand_back(world, RETRY_DELAY_S)
        return f"handed back {work.item_id}"

    def _barrier(self, world: World, decision: Any) -> str:
        if decision.status == "wait":
            self.phase = "waiting"
            return "waits at the barrier"
        if decision.status == "go":
            self.phase, self.start_at_ms = "go", decision.start_at_ms
            return f"go at {decision.start_at_ms}"
        self._delete(world)
        return f"aborted: {decision.reason}"

    def _running(self, world: World, call: Any, choice: int) -> str:
        assert self.work is not None
        work = self.work
        runtime_ms = work.workload.runtime * 1000 + work.workload.ramp_time * 1000
        assert self.start_at_ms is not None
        if self.ending is None and (
            world.clock.ms() < self.start_at_ms + runtime_ms or choice % 7 == 0
        ):
            return self._beat(world, call) or "fio runs"
        if self.ending is None:
            self.ending = choice % 11  # decided once: a retry reports the same
        if self.ending == 1:
            final = call(
                lambda s: s.report_failure(
                    work.run_id, work.item_id, self.ref, "[Errno 28] No space left on device"
                )
            )
            self._after_failure(world, final)
            return f"failed (retryable), final: {final}"
        if self.ending == 2:
            call(
                lambda s: s.report_failure(
                    work.run_id, work.item_id, self.ref, "[Errno 30] Read-only", permanent=True
                )
            )
            self._after_failure(world, True)
            return "failed (permanent)"
        for name in self.uploads:
            data = pack(b'{"start_ms":0,"end_ms":0}' if name == "timeline" else name.encode())
            call(
                lambda s, n=name, d=data: s.put_artifact(work.run_id, work.item_id, n, d, self.ref)
            )
        holder = world.store.table["items"].docs.get((work.run_id, work.item_id), {})
        created = call(lambda s: s.store_result(result_of(work, self.id), self.ref))
        world.results_stored.append((work.item_id, self.id, created, holder.get("agent_id")))
        self._delete(world)
        return f"result stored: {created}"

    def _after_failure(self, world: World, final: bool) -> None:
        if final:
            self._delete(world)
        else:
            self._hand_back(world, RETRY_DELAY_S)

    def _refused(self, world: World, call: Any, e: Exception) -> str:
        """The API refused a call (not the holder any more, say): report it, let go."""
        assert self.work is not None
        work = self.work
        try:
            final = call(
                lambda s: s.report_failure(
                    work.run_id, work.item_id, self.ref, f"the API refused this agent's call: {e}"
                )
            )
            self._after_failure(world, bool(final))
        except (*RETRIED, *REFUSED):
            self.forget()  # as the agent: it logs and moves on; the lease runs out
        return f"refused: {type(e).__name__}"

    # ---- the message --------------------------------------------------------------------

    def _renew(self, world: World) -> str:
        assert self.msg is not None
        try:
            self.msg = world.queues.renew(POOL, self.msg, self.visibility_s)
            self.leased_at = world.clock()
            return "renewed its lease"
        except LeaseLost:
            self.forget()  # someone else may hold it now: write nothing
            return "lost its lease"
        except StoreUnavailable:
            return "could not renew"

    def _delete(self, world: World) -> None:
        if self.msg is not None:
            try:
                world.queues.delete(POOL, self.msg)
            except (LeaseLost, StoreUnavailable):
                pass
        self.forget()

    def _hand_back(self, world: World, delay_s: int) -> None:
        if self.msg is not None:
            try:
                world.queues.renew(POOL, self.msg, delay_s)
            except (LeaseLost, StoreUnavailable):
                pass
        self.forget()
