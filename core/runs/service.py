"""The service's use cases, independent of HTTP and of Azure.

The API and the timer trigger call these; the store and queue come in as protocols.
Documents that several actors race on use ETag compare-and-swap with a bounded retry;
everything written more than once has a deterministic id.

A run is a list of steps (one per entry of a client sweep), run one after another. A step
of N clients sends N work items; N distinct agents claim them, lay out their files, report
ready, and are given one common start instant (the start barrier). A step whose clients do
not all claim and get ready within the barrier timeout fails with the count, and its agents
are released.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core.analysis.curves import latency_curve, repetition_spread, scaleout_curve
from core.analysis.step_aggregates import build_aggregates
from core.analysis.timeline import ClientTimeline, per_second
from core.artifacts import pack_json, sha256_hex, unpack_json, unpack_timeline
from core.catalogue import get_profile, resolve
from core.errors import BenchError, Conflict, FieldError, NotFound, ValidationFailed
from core.models import ARTIFACT_NAMES, Result, RunRequest, WorkItem, Workload
from core.monitoring.monitor import Monitor
from core.ports import Artifacts, Doc, Queue, Store
from core.runs.admission import Admission, lock_keys, run_keys
from core.runs.guardrails import (
    LOCAL_CALLER,
    Caller,
    TargetInfo,
    check_run,
    datasets_for,
    unknown_targets,
)
from core.runs.holder import AgentRef, holds, refuse
from core.runs.ownership import check_owner
from core.runs.plan import (
    body_hash,
    comparison_key,
    new_run_id,
    plan_items,
    plan_steps,
    resolve_dynamic,
    run_id_for_key,
    step_id,
)
from core.runs.state import (
    HELD_ITEM_STATES,
    TERMINAL_ITEM_STATES,
    derive_run_state,
)
from core.validation import validate

log = logging.getLogger(__name__)
CAS_ATTEMPTS = 40
BARRIER_LEAD_MS = 1500  # time between "all ready" and the start, for every agent to hear it
# A client that hears "go" up to this late still starts on the common instant (at once, so
# still within the aggregation's 1 s start-skew bound); a later one gets an instant of its own.
REJOIN_LATE_MS = 500


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TargetBusy(Conflict):
    pass


class IdempotencyMismatch(Conflict):
    pass


@dataclass(frozen=True)
class ClaimDecision:
    action: str  # "run", "drop" (delete the message) or "release" (hand it back)
    reason: str = ""


@dataclass(frozen=True)
class BarrierDecision:
    status: str  # "wait", "go" or "abort"
    start_at_ms: int | None = None
    reason: str = ""


def _is_item(d: Doc) -> bool:
    return bool(d.get("kind", "item") == "item")


def _is_step(d: Doc) -> bool:
    return bool(d.get("kind") == "step")


class RunService:
    def __init__(
        self,
        store: Store,
        queue: Queue,
        artifacts: Artifacts,
        *,
        max_deliveries: int = 5,
        pools: tuple[str, ...] = ("default",),
        barrier_lead_ms: int = BARRIER_LEAD_MS,
        rejoin_late_ms: int = REJOIN_LATE_MS,
        clock: Callable[[], float] = time.time,
        monitor: Monitor | None = None,
        targets: list[TargetInfo] | None = None,
        on_finished: Callable[[str], None] | None = None,
    ) -> None:
        self.on_finished = on_finished  # told once per run, when it is finalized
        self.store = store
        self.artifacts = artifacts
        self.targets = targets or []  # empty: any target alias an agent mounts
        self.admission = Admission(store, clock)
        self.queue = queue
        self.max_deliveries = max_deliveries
        self.pools = pools
        self.barrier_lead_ms = barrier_lead_ms
        self.rejoin_late_ms = rejoin_late_ms
        self.clock = clock
        self.monitor = monitor

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ---- runs -------------------------------------------------------------------------

    def submit(
        self, body: Any, idempotency_key: str | None = None, caller: Caller = LOCAL_CALLER
    ) -> tuple[Doc, bool]:
        """Validate, check the caller's limits, record and enqueue a run's first step.
        Returns (run, created).

        One run at a time per target: when another run holds it, the run waits in line
        (state ``waiting``, ``queue_position``) or, with ``on_busy: refuse``, is refused
        with TargetBusy and nothing is written.

        Nothing is written unless the whole body is valid. With an Idempotency-Key the run
        id derives from the key: a replay with the same body returns the same run and sends
        nothing again (or finishes the enqueue a crashed first call left undone); a replay
        with another body is refused.
        """
        request = validate("run-request", body, RunRequest)
        errors = []
        if request.pool not in self.pools:
            known = ", ".join(self.pools)
            errors.append(FieldError("pool", f"no agent pool {request.pool!r} (known: {known})"))
        profile = None
        if request.profile:
            try:
                profile = get_profile(request.profile)
            except KeyError as e:
                errors.append(FieldError("profile", str(e.args[0])))
        if profile and request.engine not in profile.engines:
            engines = ", ".join(profile.engines)
            errors.append(FieldError("engine", f"profile {profile.name} runs on {engines}"))
        errors += unknown_targets(request, self.targets)
        if errors:
            raise ValidationFailed(errors)
        base = resolve(profile, request.workload)
        specs = plan_steps(request, base)  # raises ValidationFailed for bad sweep values
        fill = request.fill if request.fill is not None else bool(profile and profile.fill)
        check_run(request, specs, base, fill, caller, self.targets)
        run_id = run_id_for_key(idempotency_key) if idempotency_key else new_run_id()
        digest = body_hash(body)
        targets = request.all_targets
        resolved = base.model_dump(mode="json")
        keys = lock_keys(request.pool, targets)
        admitted = self._admit_or_refuse(run_id, keys, request.on_busy, idempotency_key)
        run_doc: Doc = {
            "id": run_id,
            "created_at": now_iso(),
            "created_ms": self._now_ms(),
            "request": request.model_dump(mode="json"),
            "engine": request.engine,
            "profile": profile.name if profile else None,
            "profile_version": profile.version if profile else None,
            "workload": resolved,
            "comparison_key": comparison_key(request.engine, resolved, targets, request.clients),
            "fill": fill,
            "files_per_target": profile.files_per_target if profile else 1,
            "cooldown_s": profile.cooldown_s if profile else 0,
            "datasets": {a: d.model_dump() for a, d in datasets_for(request, self.targets).items()},
            "target": targets[0],
            "targets": targets,
            "pool": request.pool,
            "tags": request.tags,
            "step_count": len(specs),
            "state": "queued" if admitted else "waiting",
            "admitted": admitted,
            "requested_by": caller.as_doc(),
            "body_hash": digest,
            "idempotency_key": idempotency_key,
            "enqueued": False,
            "cancel_requested": False,
            "finalized": False,
            "items_total": sum(s["clients"] for s in specs),
            "counts": {},
            "error": None,
        }
        try:
            run = self.store.create_run(run_doc)
            created = True
        except Conflict:
            run = self.store.get_run(run_id)
            if run.get("body_hash") != digest:
                raise IdempotencyMismatch(
                    "Idempotency-Key was already used with a different request body"
                ) from None
            created = False
            if run.get("enqueued") or not run.get("admitted", True):
                return self._with_position(run), False
        for spec in specs:
            barrier: Doc = {
                "enqueued": False,
                "first_claim_ms": None,
                "deadline_ms": None,
                "start_at_ms": None,
                "failed_reason": None,
                "ready": {},
            }
            self._create_once(
                {
                    **spec,
                    **barrier,
                    "id": step_id(run_id, spec["step"]),
                    "run_id": run_id,
                    "kind": "step",
                }
            )
        if not run.get("admitted", True):
            return self._with_position(run), created
        self._enqueue_step(run, 0)
        run = self._update_run(run_id, lambda r: r.update(enqueued=True))
        return run, created

    def _admit_or_refuse(
        self, run_id: str, keys: list[str], on_busy: str, idempotency_key: str | None
    ) -> bool:
        """Take the run's target locks now if nobody holds them or waits for them."""
        if idempotency_key:
            try:
                existing = self.store.get_run(run_id)
                return bool(existing.get("admitted", True))  # a replay: decided already
            except NotFound:
                pass
        busy = self.admission.busy(keys, run_id, self.store.waiting_runs())
        if busy is None and self.admission.try_acquire(keys, run_id):
            return True
        if on_busy == "refuse":
            who = f"run {busy.holder}" if busy else "another run"
            waiting = f"; {busy.waiting} waiting" if busy and busy.waiting else ""
            target = (busy.key if busy else keys[0]).split(":", 1)[1]
            raise TargetBusy(f"target {target} is busy with {who}{waiting}")
        return False

    def _with_position(self, run: Doc) -> Doc:
        if run.get("state") != "waiting":
            return run
        return {**run, "queue_position": self.admission.position(run, self.store.waiting_runs())}

    def dispatch_waiting(self) -> list[str]:
        """Start the waiting runs whose targets have come free, in submission order."""
        started = []
        for run in self.admission.admissible(self.store.waiting_runs()):
            if run.get("cancel_requested"):
                continue
            if self.admission.try_acquire(run_keys(run), run["id"]):
                self._update_run(run["id"], lambda r: r.update(admitted=True, state="queued"))
                self._enqueue_step(run, 0)
                self._update_run(run["id"], lambda r: r.update(enqueued=True))
                started.append(run["id"])
        return started

    def get_run(self, run_id: str) -> Doc:
        run = self._with_position(self.store.get_run(run_id))
        docs = self.store.list_items(run_id)
        results = {r["item_id"]: r for r in self.store.list_results(run_id)}
        aggregates = {a["step"]: a for a in self.store.list_aggregates(run_id)}
        steps = [
            {
                **{k: s.get(k) for k in _STEP_PUBLIC},
                "aggregate": _strip(aggregates.get(s["step"])),
            }
            for s in sorted(filter(_is_step, docs), key=lambda s: s["step"])
        ]
        items = sorted(filter(_is_item, docs), key=lambda i: (i["step"], i["client"]))
        return {
            **_public_run(run),
            **({"queue_position": run["queue_position"]} if "queue_position" in run else {}),
            "steps": steps,
            "items": [_public_item(i, results.get(i["id"])) for i in items],
            "aggregate": steps[-1]["aggregate"] if steps else None,
        }

    def curves(self, run_id: str) -> Doc:
        self.store.get_run(run_id)  # 404 for an unknown run
        aggs = sorted(self.store.list_aggregates(run_id), key=lambda a: a["step"])
        return {
            "run_id": run_id,
            "latency": latency_curve(aggs),
            "scaleout": scaleout_curve(aggs),
            "repetitions": repetition_spread(aggs),
        }

    def list_runs(
        self,
        *,
        target: str | None = None,
        state: str | None = None,
        tag: tuple[str, str] | None = None,
        limit: int = 50,
        continuation: str | None = None,
    ) -> tuple[list[Doc], str | None]:
        docs, token = self.store.query_runs(
            target=target, state=state, tag=tag, limit=limit, continuation=continuation
        )
        return [_public_run(d) for d in docs], token

    def cancel(self, run_id: str, caller: Caller = LOCAL_CALLER) -> Doc:
        """Queued items are marked cancelled now and dropped by whichever agent receives
        them; held items are stopped at the agent's next heartbeat. Runners cancel their
        own runs; engineers and admins any."""
        run = self.store.get_run(run_id)
        owner = (run.get("requested_by") or {}).get("name")
        check_owner(caller, owner, "requested_by.name", f"run {run_id}")
        if run["state"] in ("completed", "failed", "cancelled"):
            return _public_run(run)
        self._update_run(run_id, lambda r: r.update(cancel_requested=True))
        for item in filter(_is_item, self.store.list_items(run_id)):
            if item["state"] == "queued":
                # Decided again on the fresh document: an item claimed meanwhile is stopped
                # by its agent's heartbeat instead.
                cancelled = _set_if(
                    "queued", state="cancelled", reason="run cancelled", ended_at=now_iso()
                )
                self._update_item(run_id, item["id"], cancelled)
        return _public_run(self._refresh(run_id))

    # ---- agent protocol ---------------------------------------------------------------
    #
    # Every report is accepted only from the agent holding the item (core.runs.holder), in a
    # state where it makes sense, and each decision is taken inside the compare-and-swap on
    # the document as freshly read for the write: a racing or forged report changes nothing.

    def claim(
        self, item: WorkItem, *, agent: AgentRef, dequeue_count: int, message_id: str = ""
    ) -> ClaimDecision:
        """Decide whether an agent that just received ``item`` should take it.

        Of several agents racing for one item (copies of its message sent twice), exactly
        one is told to run: the decision is made in the item's compare-and-swap."""
        try:
            run = self.store.get_run(item.run_id)
            doc = self.store.get_item(item.run_id, item.item_id)
            step = self.store.get_item(item.run_id, step_id(item.run_id, item.step))
        except NotFound:
            return ClaimDecision("drop", "unknown run or item")
        if doc["state"] in TERMINAL_ITEM_STATES:
            return ClaimDecision("drop", f"item already {doc['state']}")
        if _held_by_another(doc, agent, message_id, dequeue_count):
            # A copy of a message someone else holds: it ends nothing (decided again below,
            # inside the compare-and-swap, for the copy that might still take the item).
            return ClaimDecision("drop", f"duplicate message: {doc.get('agent_id')} holds it")
        if run.get("cancel_requested"):
            self._end_item(item, "cancelled", "run cancelled")
            return ClaimDecision("drop", "run cancelled")
        if step.get("failed_reason"):
            self._end_item(item, "failed", step["failed_reason"])
            return ClaimDecision("drop", step["failed_reason"])
        if dequeue_count > self.max_deliveries:
            last = doc["errors"][-1]["message"] if doc.get("errors") else "no error reported"
            reason = (
                f"moved to the poison queue after {dequeue_count - 1} deliveries; "
                f"last error: {last}"
            )
            self.queue.send_poison(item.pool, item.model_dump_json())
            self._end_item(item, "failed", reason)
            return ClaimDecision("drop", reason)
        siblings = [
            d
            for d in self.store.list_items(item.run_id)
            if _is_item(d)
            and d["step"] == item.step
            and d["id"] != item.item_id
            and d.get("agent_id") == agent.id
            and d["state"] in HELD_ITEM_STATES
        ]
        if siblings:
            return ClaimDecision("release", f"{agent.id} already holds {siblings[0]['id']}")

        now = self._now_ms()
        started_together = step.get("start_at_ms") is not None and step["clients"] > 1
        verdict: list[ClaimDecision] = []

        def take(d: Doc) -> bool | None:
            if d["state"] in TERMINAL_ITEM_STATES:
                verdict[:] = [ClaimDecision("drop", f"item already {d['state']}")]
                return False
            if _held_by_another(d, agent, message_id, dequeue_count):
                holder = d.get("agent_id")
                verdict[:] = [ClaimDecision("drop", f"duplicate message: {holder} holds it")]
                return False
            if d["state"] in HELD_ITEM_STATES and not holds(d, agent):
                # The holder's lease ran out: the queue gave its message out again.
                holder = d.get("agent_id")
                if started_together:
                    reason = f"client {holder} stopped renewing its lease during the step"
                    d.update(state="failed", reason=reason, ended_at=now_iso())
                    verdict[:] = [ClaimDecision("drop", reason)]
                    return None
            d.update(
                state="claimed",
                agent_id=agent.id,
                principal=agent.principal,
                message_id=message_id,
                attempts=dequeue_count,
                claimed_at=now_iso(),
                heartbeat_at=now_iso(),
                start_at_ms=None,  # an instant of its own is given again if needed
            )
            verdict[:] = [ClaimDecision("run")]
            return None

        def open_barrier(s: Doc) -> None:
            if s["clients"] == 1 and s.get("start_at_ms"):
                s.update(start_at_ms=None, first_claim_ms=None)  # a retry: a fresh barrier
            if s.get("start_at_ms") is None:
                s["ready"] = {k: v for k, v in (s.get("ready") or {}).items() if k != item.item_id}
            if s.get("first_claim_ms") is None:
                s.update(first_claim_ms=now, deadline_ms=now + item.barrier_timeout_s * 1000)

        after = self._update_item(item.run_id, item.item_id, take)
        if verdict[0].action == "run":
            self._update_item(item.run_id, step["id"], open_barrier)
        if verdict[0].action == "run" or after["state"] in TERMINAL_ITEM_STATES:
            self._refresh(item.run_id)
        return verdict[0]

    def ready(self, run_id: str, item_id: str, agent: AgentRef) -> BarrierDecision:
        """The agent has laid out its files and waits for the step's start instant.

        Readiness is recorded on the step document by compare-and-swap, and the client that
        completes the set also sets the start instant in the same write: no two concurrent
        readies can both miss the moment the step became complete.
        """
        refused: list[bool] = []

        def mark(d: Doc) -> bool | None:
            refused[:] = [not holds(d, agent) or d["state"] not in ("claimed", "ready")]
            if refused[0] or d["state"] == "ready":
                return False  # refused, or a retry of a ready already recorded
            d.update(state="ready", ready_at=now_iso())
            return None

        doc = self._update_item(run_id, item_id, mark)
        if refused[0]:
            if holds(doc, agent) and doc["state"] in TERMINAL_ITEM_STATES:
                return _ended(doc)
            raise refuse(doc, agent, "ready")
        now = self._now_ms()

        def join(s: Doc) -> None:
            if s.get("start_at_ms") is not None or s.get("failed_reason"):
                return
            ready = dict(s.get("ready") or {})
            ready[item_id] = agent.id
            s["ready"] = ready
            if len(ready) == s["clients"] and len(set(ready.values())) == s["clients"]:
                s["start_at_ms"] = now + self.lead_ms(s["clients"])

        self._update_item(run_id, step_id(run_id, doc["step"]), join)
        return self._barrier(run_id, doc, agent)

    def lead_ms(self, clients: int) -> int:
        """Time from "all ready" to the start, for every agent's next poll to hear it."""
        return self.barrier_lead_ms + 50 * clients

    def barrier(self, run_id: str, item_id: str, agent: AgentRef) -> BarrierDecision:
        """An agent's poll while it waits: a read of its item and of the step document,
        unless the deadline has passed."""
        doc = self.store.get_item(run_id, item_id)
        if not holds(doc, agent) or doc["state"] == "queued":
            raise refuse(doc, agent, "barrier")
        return self._barrier(run_id, doc, agent)

    def _barrier(self, run_id: str, doc: Doc, agent: AgentRef) -> BarrierDecision:
        if doc["state"] in TERMINAL_ITEM_STATES:
            return _ended(doc)
        if doc.get("start_at_ms") is not None:  # an instant of its own (see _rebarrier)
            return BarrierDecision("go", start_at_ms=int(doc["start_at_ms"]))
        step = self.store.get_item(run_id, step_id_of(doc["id"]))
        if step.get("failed_reason"):
            return BarrierDecision("abort", reason=step["failed_reason"])
        if step.get("start_at_ms") is not None:
            late_ms = self._now_ms() - int(step["start_at_ms"])
            if late_ms <= self.rejoin_late_ms:
                return BarrierDecision("go", start_at_ms=int(step["start_at_ms"]))
            return self._rebarrier(run_id, doc["id"], step, agent, late_ms)
        deadline = step.get("deadline_ms")
        if deadline is None or self._now_ms() <= deadline:
            return BarrierDecision("wait")
        members = [
            d for d in self.store.list_items(run_id) if _is_item(d) and d["step"] == step["step"]
        ]
        claimed = sum(1 for d in members if d["state"] in HELD_ITEM_STATES)
        ready = len(step.get("ready") or {})
        secs = (deadline - step["first_claim_ms"]) // 1000
        reason = (
            f"{claimed} of {step['clients']} clients claimed within {secs} s"
            if claimed < step["clients"]
            else f"{ready} of {step['clients']} clients were ready within {secs} s"
        )
        step = self._update_item(run_id, step["id"], _fail_step(reason))
        if step.get("start_at_ms") is not None:  # completed just before the deadline
            return BarrierDecision("go", start_at_ms=int(step["start_at_ms"]))
        for d in members:
            self._update_item(run_id, d["id"], _set_state("failed", step["failed_reason"]))
        self._refresh(run_id)
        return BarrierDecision("abort", reason=step["failed_reason"])

    def _rebarrier(
        self, run_id: str, item_id: str, step: Doc, agent: AgentRef, late_ms: int
    ) -> BarrierDecision:
        """This client hears "go" after its step's instant has passed: it was redelivered,
        or could not reach the API while it waited (issue 11.9: after a 41 s outage a
        client started 58,808 ms after the others). Told the old instant it would start at
        once, as if together with clients that are done by now. It gets a start instant of
        its own instead, recorded on its item with why; the step's common instant stays,
        so the aggregation sees how far from it this client started. A client alone in its
        step moves the step's instant with it."""
        now = self._now_ms()
        common = int(step["start_at_ms"])
        fresh = now + self.lead_ms(1)
        if step["clients"] == 1:

            def move(s: Doc) -> bool | None:
                if s.get("start_at_ms") != common:
                    return False  # a retry of this poll moved it already
                s["start_at_ms"] = fresh
                return None

            fresh = int(self._update_item(run_id, step["id"], move)["start_at_ms"])
        note = {"at_ms": now, "step_start_at_ms": common, "late_ms": late_ms, "start_at_ms": fresh}
        given: list[bool] = []

        def own(d: Doc) -> bool | None:
            given[:] = [holds(d, agent) and d["state"] in HELD_ITEM_STATES]
            if not given[0] or d.get("start_at_ms") is not None:
                return False
            d["start_at_ms"] = fresh if step["clients"] > 1 else None
            d["rebarriered"] = note
            return None

        doc = self._update_item(run_id, item_id, own)
        if not given[0]:
            raise refuse(doc, agent, "barrier")
        log.warning(
            "item %s heard its step's start %d ms late: own instant %d", item_id, late_ms, fresh
        )
        return BarrierDecision("go", start_at_ms=int(doc.get("start_at_ms") or fresh))

    def heartbeat(self, run_id: str, item_id: str, agent: AgentRef) -> dict[str, bool]:
        """Tells the agent to stop when the run was cancelled; marks a ready item running
        once its start instant has passed. An item its agent no longer holds (taken over,
        failed, gone) is refused: the agent stops and writes nothing."""
        run = self.store.get_run(run_id)
        doc = self.store.get_item(run_id, item_id)
        if not holds(doc, agent) or doc["state"] not in HELD_ITEM_STATES:
            raise refuse(doc, agent, "heartbeat")
        start = doc.get("start_at_ms")
        if start is None:
            start = self.store.get_item(run_id, step_id_of(item_id)).get("start_at_ms")
        started = start is not None and start <= self._now_ms()
        held: list[bool] = []

        def beat(d: Doc) -> bool | None:
            held[:] = [holds(d, agent) and d["state"] in HELD_ITEM_STATES]
            if not held[0]:
                return False
            d["heartbeat_at"] = now_iso()
            if started and d["state"] == "ready":
                d.update(state="running", started_at=now_iso())
            return None

        doc = self._update_item(run_id, item_id, beat)
        if not held[0]:
            raise refuse(doc, agent, "heartbeat")
        return {"cancel": bool(run.get("cancel_requested"))}

    def report_failure(
        self,
        run_id: str,
        item_id: str,
        agent: AgentRef,
        message: str,
        *,
        report_id: str | None = None,
        permanent: bool = False,
    ) -> bool:
        """A failed attempt. Returns True when it is final (the agent deletes the message):
        a ``permanent`` failure (the agent says no retry can succeed), or a client of a
        multi-client step that already started (it cannot be redone on its own).

        ``report_id`` keys the report: a retry of one already recorded returns the same
        answer and records nothing twice."""
        doc = self.store.get_item(run_id, item_id)
        step = self.store.get_item(run_id, step_id(run_id, doc["step"]))
        final = permanent or (step["clients"] > 1 and step.get("start_at_ms") is not None)
        outcome: list[bool | None] = []  # [final], [None] when refused
        replay: list[bool] = []

        def fail(d: Doc) -> bool | None:
            seen = next(
                (
                    e
                    for e in d.get("errors", [])
                    if report_id
                    and e.get("report_id") == report_id
                    and e.get("agent_id") == agent.id
                ),
                None,
            )
            replay[:] = [seen is not None]
            if seen is not None:
                outcome[:] = [bool(seen.get("final"))]
                return False
            if not holds(d, agent) or d["state"] not in HELD_ITEM_STATES:
                outcome[:] = [None]
                return False
            outcome[:] = [final]
            error: Doc = {"at": now_iso(), "agent_id": agent.id, "message": message[:2000]}
            if report_id:
                error.update(report_id=report_id, final=final)
            d["errors"] = [*list(d.get("errors", []))[-9:], error]
            if final:
                d.update(state="failed", reason=message[:2000], ended_at=now_iso())
            else:
                d.update(state="queued", agent_id=None, principal=None, start_at_ms=None)
            return None

        doc = self._update_item(run_id, item_id, fail)
        if outcome[0] is None:
            raise refuse(doc, agent, "failure report")
        if replay[0]:
            return outcome[0]
        if not final:
            self._update_item(run_id, step["id"], _unready(item_id))
        self._refresh(run_id)
        return final

    def report_cancelled(self, run_id: str, item_id: str, agent: AgentRef) -> None:
        """The agent stopped its item because the run was cancelled."""
        run = self.store.get_run(run_id)
        accepted: list[bool] = []

        def stop(d: Doc) -> bool | None:
            if holds(d, agent) and d["state"] == "cancelled":
                accepted[:] = [True]  # a retry of a report already recorded
                return False
            accepted[:] = [
                holds(d, agent)
                and d["state"] in HELD_ITEM_STATES
                and bool(run.get("cancel_requested"))
            ]
            if not accepted[0]:
                return False
            d.update(state="cancelled", reason=f"stopped by {agent.id}", ended_at=now_iso())
            return None

        doc = self._update_item(run_id, item_id, stop)
        if not accepted[0]:
            raise refuse(doc, agent, "cancelled report")
        self._refresh(run_id)

    def put_artifact(
        self, run_id: str, item_id: str, name: str, data: bytes, agent: AgentRef
    ) -> int:
        """Keep one of an item's large outputs (gzip bytes) in Blob Storage, before its
        result names it, from the agent holding the item after its start (an upload again
        writes the same blob). Returns the stored size."""
        if name not in ARTIFACT_NAMES:
            raise ValidationFailed(
                [FieldError("name", f"must be one of {', '.join(ARTIFACT_NAMES)}")]
            )
        doc = self.store.get_item(run_id, item_id)  # NotFound -> 404
        if not holds(doc, agent) or doc["state"] not in ("ready", "running"):
            raise refuse(doc, agent, "artifact")
        self.artifacts.put(run_id, item_id, name, data)
        return len(data)

    def store_result(self, body: Any, agent: AgentRef) -> bool:
        """Store one client's result once, from the agent holding the item after its
        start. Returns False when it was already stored (a retry).

        Every artifact the result names must already be in Blob Storage at the size it
        says: a result never points at a file that is not there."""
        result = validate("result", body, Result)
        errors = []
        if result.id != result.item_id:
            errors.append(FieldError("id", "must equal item_id"))
        if result.agent_id != agent.id:
            errors.append(FieldError("agent_id", f"must be the reporting agent, {agent.id}"))
        doc = self.store.get_item(result.run_id, result.item_id)  # NotFound -> 404
        for name in ("step", "client"):
            if getattr(result, name) != doc[name]:
                errors.append(FieldError(name, f"must be the item's {name}, {doc[name]}"))
        if errors:
            raise ValidationFailed(errors)
        # Checked on a fresh read before the result is written (a forged result is never
        # stored); the item's state then changes by compare-and-swap. The result is written
        # first so that a completed item always has its result when the timer aggregates.
        if not holds(doc, agent) or doc["state"] not in ("ready", "running", "completed"):
            raise refuse(doc, agent, "result")
        for name, artifact in result.artifacts.items():
            try:
                size = self.artifacts.size(result.run_id, result.item_id, name)
            except NotFound:
                size = -1
            if size != artifact.bytes:
                raise ValidationFailed(
                    [
                        FieldError(
                            f"artifacts.{name}",
                            f"not uploaded (or not at {artifact.bytes} bytes): "
                            f"PUT /api/agent/artifacts/{result.item_id}/{name} first",
                        )
                    ]
                )
        created = self.store.create_result(result.model_dump(mode="json"))
        flipped: list[bool] = []

        def done(d: Doc) -> bool | None:
            flipped[:] = [holds(d, agent) and d["state"] in ("ready", "running")]
            if not flipped[0]:
                return False
            d.update(state="completed", ended_at=now_iso())
            return None

        self._update_item(result.run_id, result.item_id, done)
        if flipped[0]:
            self._refresh(result.run_id)
        return created

    def full_result(self, run_id: str, item_id: str) -> Doc:
        """A client's result with its per-second series and the engine's own output, read
        back from Blob Storage."""
        doc = {k: v for k, v in self.store.get_result(run_id, item_id).items() if k[0] != "_"}
        names = doc.get("artifacts") or {}
        timeline = self._timeline(run_id, item_id) if "timeline" in names else None
        doc["series"] = (
            {
                d: per_second([timeline], d, (timeline.start_ms, timeline.end_ms))
                for d in ("read", "write")
                if timeline.direction(d) is not None
            }
            if timeline
            else {}
        )
        doc["raw"] = (
            unpack_json(self.artifacts.get(run_id, item_id, "raw")) if "raw" in names else None
        )
        return doc

    def _timeline(self, run_id: str, item_id: str) -> ClientTimeline | None:
        try:
            return unpack_timeline(self.artifacts.get(run_id, item_id, "timeline"))
        except NotFound:
            log.warning("timeline of %s is missing from Blob Storage", item_id)
            return None

    def _timelines(self, run_id: str, results: list[Doc]) -> dict[str, ClientTimeline]:
        out = {}
        for r in results:
            if "timeline" in (r.get("artifacts") or {}):
                t = self._timeline(run_id, r["item_id"])
                if t is not None:
                    out[r["item_id"]] = t
        return out

    def _store_aggregate(self, agg: Doc) -> None:
        """The per-second series can outgrow a document: it goes to Blob Storage."""
        series = agg.pop("series", None)
        if series:
            packed = pack_json(series)
            self.artifacts.put(agg["run_id"], agg["id"], "series", packed)
            agg["series_artifact"] = {"bytes": len(packed), "sha256": sha256_hex(packed)}
        self.store.create_aggregate(agg)

    # ---- timer ------------------------------------------------------------------------

    def finalize_runs(self) -> list[str]:
        """Aggregate every finished run, step by step; mark it completed or failed.

        Aggregate ids are ``<run>.s<step>``, so two timers racing store each once; the run
        document is then updated by compare-and-swap.
        """
        self.dispatch_waiting()  # also catches a start missed when a holder finished
        done = []
        for run in self.store.active_runs():
            if run.get("finalized") or run.get("cancel_requested"):
                continue
            docs = self.store.list_items(run["id"])
            refreshed = self._refresh(run["id"], docs)  # also enqueues a due next step
            if not refreshed.get("finished"):
                continue
            results = self.store.list_results(run["id"])
            aggregates = build_aggregates(run, docs, results, self._timelines(run["id"], results))
            for agg in aggregates:
                self._store_aggregate(agg)
            if self.monitor is not None:
                # Before the run is marked finalized: a crash here is retried next tick,
                # and every write below is idempotent.
                self.monitor.record(run, aggregates, results)
            flipped = self._mark_finalized(run["id"])
            self._refresh(run["id"])
            done.append(run["id"])
            if flipped and self.on_finished is not None:
                self.on_finished(run["id"])
        return done

    # ---- internals --------------------------------------------------------------------

    def _mark_finalized(self, run_id: str) -> bool:
        """True when this call, not a racing timer, flipped the run to finalized."""
        flipped: list[bool] = []

        def mark(r: Doc) -> None:
            flipped[:] = [not r.get("finalized")]
            r["finalized"] = True

        self._update_run(run_id, mark)
        return flipped[0]

    def _create_once(self, doc: Doc) -> None:
        try:
            self.store.create_item(doc)
        except Conflict:
            pass  # a replay finishing an interrupted submit or advance

    def _enqueue_step(self, run: Doc, step: int) -> None:
        """Resolve, create and send a step's items, then mark the step enqueued. Racing
        callers may both send: a second copy of an item is dropped at claim (another
        message id)."""
        run_id = run["id"]
        sdoc = self.store.get_item(run_id, step_id(run_id, step))
        if sdoc.get("enqueued"):
            return
        if sdoc.get("workload") is None:  # a rate-curve or target_iops step
            ref = self._step_aggregate(run, int(sdoc["ref_step"]))
            if ref is None:
                reason = f"step {sdoc['ref_step']} gave no result to size this step from"
                self._update_item(run_id, sdoc["id"], _fail_step(reason))
                return
            base = Workload.model_validate(run["workload"])
            resolved = resolve_dynamic(
                sdoc,
                base,
                ref,
                engine=run["engine"],
                mounts=len(run["targets"]),
                files_per_target=int(run.get("files_per_target", 1)),
            ).model_dump(mode="json")
            sdoc = self._update_item(run_id, sdoc["id"], lambda s: s.update(workload=resolved))
        items = plan_items(run_id, run, sdoc, Workload.model_validate(sdoc["workload"]))
        for it in items:
            self._create_once(_item_doc(it))
        for it in items:
            self.queue.send(it)
        self._update_item(run_id, sdoc["id"], lambda s: s.update(enqueued=True))

    def _step_aggregate(self, run: Doc, step: int) -> Doc | None:
        docs = [d for d in self.store.list_items(run["id"]) if d.get("step") == step]
        results = [r for r in self.store.list_results(run["id"]) if r["step"] == step]
        aggs = build_aggregates(run, docs, results, self._timelines(run["id"], results))
        return aggs[0] if aggs else None

    def _end_item(self, item: WorkItem, state: str, reason: str) -> None:
        self._update_item(item.run_id, item.item_id, _set_state(state, reason))
        self._refresh(item.run_id)

    def _cas(
        self,
        read: Callable[[], Doc],
        write: Callable[[Doc], Doc],
        change: Callable[[Doc], bool | None],
        what: str,
    ) -> Doc:
        """Read, change, write if unchanged since the read; again on a conflict. ``change``
        decides on the document as read for this write; returning False means "nothing to
        write" (the document is returned as read)."""
        for attempt in range(CAS_ATTEMPTS):
            doc = read()
            if change(doc) is False:
                return doc
            try:
                return write(doc)
            except Conflict:
                # Many agents report at once at a step's start: back off a little, with jitter.
                time.sleep(random.uniform(0, 0.005 * (attempt + 1)))
        raise BenchError(f"{what} kept changing under us")

    def _update_run(self, run_id: str, change: Callable[[Doc], None]) -> Doc:
        def stamped(d: Doc) -> None:
            change(d)
            d["updated_at"] = now_iso()

        return self._cas(
            lambda: self.store.get_run(run_id), self.store.replace_run, stamped, f"run {run_id}"
        )

    def _update_item(self, run_id: str, doc_id: str, change: Callable[[Doc], bool | None]) -> Doc:
        return self._cas(
            lambda: self.store.get_item(run_id, doc_id),
            self.store.replace_item,
            change,
            f"{doc_id}",
        )

    def _refresh(self, run_id: str, docs: list[Doc] | None = None) -> Doc:
        """Recompute the run's state from its items and steps, and enqueue the next step
        once the previous one has ended."""
        docs = docs if docs is not None else self.store.list_items(run_id)
        items = [d for d in docs if _is_item(d)]
        steps = sorted((d for d in docs if _is_step(d)), key=lambda s: s["step"])
        states = [i["state"] for i in items]
        counts: dict[str, int] = {}
        for s in states:
            counts[s] = counts.get(s, 0) + 1
        step_failed = [s["failed_reason"] for s in steps if s.get("failed_reason")]
        item_reasons = [i["reason"] for i in items if i["state"] == "failed" and i.get("reason")]
        run = self.store.get_run(run_id)
        next_step = next((s for s in steps if not s.get("enqueued")), None)
        all_ended = all(st in TERMINAL_ITEM_STATES for st in states)
        admitted = bool(run.get("admitted", True))
        if (
            next_step is not None
            and all_ended
            and admitted
            and not step_failed
            and not run.get("cancel_requested")
        ):
            self._enqueue_step(run, next_step["step"])
            return self._refresh(run_id)
        finished = all_ended and (next_step is None or bool(step_failed))

        def apply(r: Doc) -> None:
            r["state"] = derive_run_state(
                states,
                cancel_requested=bool(r.get("cancel_requested")),
                finalized=bool(r.get("finalized")),
                finished=finished,
                admitted=admitted,
            )
            r["counts"] = counts
            r["finished"] = finished
            r["error"] = (step_failed + item_reasons or [None])[0]

        was_finished = bool(run.get("finished"))
        updated = self._update_run(run_id, apply)
        if finished and admitted and not was_finished:
            self.dispatch_waiting()  # its targets are free: start who waits, now
        return updated


def _item_doc(item: WorkItem) -> Doc:
    return {
        "id": item.item_id,
        "run_id": item.run_id,
        "kind": "item",
        "step": item.step,
        "client": item.client,
        "state": "queued",
        "agent_id": None,
        "message_id": None,
        "attempts": 0,
        "errors": [],
        "reason": None,
        "started_at": None,
        "ended_at": None,
        "work_item": item.model_dump(mode="json"),
    }


def _set_state(state: str, reason: str) -> Callable[[Doc], None]:
    def apply(d: Doc) -> None:
        if d["state"] not in TERMINAL_ITEM_STATES:
            d.update(state=state, reason=reason, ended_at=now_iso())

    return apply


def _held_by_another(d: Doc, agent: AgentRef, message_id: str, dequeue_count: int) -> bool:
    """Whether another agent holds the item and this delivery may not take it over. Only a
    later delivery of the holder's own message may: the queue gave it out again because the
    holder's lease ran out (a higher dequeue count than the holder's claim)."""
    if d["state"] not in HELD_ITEM_STATES or holds(d, agent):
        return False
    redelivered = d.get("message_id") == message_id and dequeue_count > int(d.get("attempts") or 0)
    return not redelivered


def _ended(doc: Doc) -> BarrierDecision:
    return BarrierDecision("abort", reason=doc.get("reason") or f"item {doc['state']}")


def _start_at(instant_ms: int) -> Callable[[Doc], None]:
    def apply(s: Doc) -> None:
        if s.get("start_at_ms") is None and not s.get("failed_reason"):
            s["start_at_ms"] = instant_ms

    return apply


def _set_if(when: str, **changes: Any) -> Callable[[Doc], None]:
    def apply(d: Doc) -> None:
        if d["state"] == when:
            d.update(changes)

    return apply


def _unready(item_id: str) -> Callable[[Doc], None]:
    def apply(s: Doc) -> None:
        if s.get("start_at_ms") is None:
            s["ready"] = {k: v for k, v in (s.get("ready") or {}).items() if k != item_id}
        elif s["clients"] == 1:
            s.update(start_at_ms=None, first_claim_ms=None, ready={})  # a retry: a fresh barrier

    return apply


def step_id_of(item_id: str) -> str:
    """``<run>.s<step>.c<client>`` -> ``<run>.s<step>``."""
    return item_id.rsplit(".", 1)[0]


def _fail_step(reason: str) -> Callable[[Doc], None]:
    def apply(s: Doc) -> None:
        if s.get("start_at_ms") is None and not s.get("failed_reason"):
            s["failed_reason"] = reason

    return apply


def _strip(doc: Doc | None) -> Doc | None:
    if doc is None:
        return None
    return {k: v for k, v in doc.items() if not k.startswith("_")}


_STEP_PUBLIC = (
    "step",
    "clients",
    "mode",
    "point",
    "repetition",
    "discarded",
    "workload",
    "start_at_ms",
    "failed_reason",
)
_RUN_PUBLIC = (
    "id",
    "state",
    "created_at",
    "updated_at",
    "target",
    "targets",
    "pool",
    "tags",
    "request",
    "items_total",
    "engine",
    "profile",
    "profile_version",
    "workload",
    "comparison_key",
    "fill",
    "step_count",
    "counts",
    "error",
    "cancel_requested",
    "requested_by",
)


def _public_run(doc: Doc) -> Doc:
    return {k: doc.get(k) for k in _RUN_PUBLIC}


def _public_item(doc: Doc, result: Doc | None) -> Doc:
    keys = (
        "id",
        "step",
        "client",
        "state",
        "agent_id",
        "attempts",
        "errors",
        "reason",
        "started_at",
        "ended_at",
        "start_at_ms",  # an instant of its own, when it heard its step's too late
        "rebarriered",
    )
    out = {k: doc.get(k) for k in keys}
    out["result"] = result_summary(result) if result else None
    return out


def result_summary(doc: Doc) -> Doc:
    """A result without fio's raw JSON and histogram bins, which can run to megabytes."""
    keys = ("agent_id", "engine_version", "started_at_ms", "ended_at_ms", "start", "host", "mounts")
    out: Doc = {k: doc[k] for k in keys if k in doc}
    for d in ("read", "write"):
        r = doc.get(d)
        if r:
            p = r["clat_percentiles_ns"]
            out[d] = {
                "iops": r["iops"],
                "bw_bytes": r["bw_bytes"],
                "total_ios": r["total_ios"],
                "lat_mean_ns": r["lat_ns"]["mean"],
                "clat_ns": {
                    "p50": p.get("50.000000"),
                    "p99": p.get("99.000000"),
                    "p99.9": p.get("99.900000"),
                },
            }
    return out
