"""The service's use cases, independent of HTTP and of Azure.

The API and the timer trigger call these; the store and queue come in as protocols.
Writes that several actors race on (the run document) use ETag compare-and-swap with a
bounded retry; everything written more than once has a deterministic id.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core.aggregate import ClientSample, FailedClient, aggregate
from core.errors import BenchError, Conflict, FieldError, NotFound, ValidationFailed
from core.models import Direction, DirectionResult, Result, RunRequest, WorkItem
from core.plan import body_hash, new_run_id, plan_items, run_id_for_key
from core.ports import Doc, Queue, Store
from core.runstate import TERMINAL_ITEM_STATES, all_items_terminal, derive_run_state
from core.validation import validate

log = logging.getLogger(__name__)
CAS_ATTEMPTS = 8


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class IdempotencyMismatch(Conflict):
    pass


@dataclass(frozen=True)
class ClaimDecision:
    action: str  # "run" or "drop"
    reason: str = ""


class RunService:
    def __init__(
        self,
        store: Store,
        queue: Queue,
        *,
        max_deliveries: int = 5,
        pools: tuple[str, ...] = ("default",),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.queue = queue
        self.max_deliveries = max_deliveries
        self.pools = pools
        self.clock = clock

    # ---- runs -------------------------------------------------------------------------

    def submit(self, body: Any, idempotency_key: str | None = None) -> tuple[Doc, bool]:
        """Validate, record and enqueue a run. Returns (run, created).

        Nothing is written unless the whole body is valid. With an Idempotency-Key the run
        id derives from the key: a replay with the same body returns the same run and sends
        nothing again (or finishes the enqueue a crashed first call left undone); a replay
        with another body is refused.
        """
        request = validate("run-request", body, RunRequest)
        if request.pool not in self.pools:
            known = ", ".join(self.pools)
            raise ValidationFailed(
                [FieldError("pool", f"no agent pool {request.pool!r} (known: {known})")]
            )
        run_id = run_id_for_key(idempotency_key) if idempotency_key else new_run_id()
        digest = body_hash(body)
        items = plan_items(run_id, request)
        run_doc: Doc = {
            "id": run_id,
            "created_at": now_iso(),
            "created_ms": int(self.clock() * 1000),
            "request": request.model_dump(mode="json"),
            "target": request.target,
            "pool": request.pool,
            "tags": request.tags,
            "state": "queued",
            "body_hash": digest,
            "idempotency_key": idempotency_key,
            "enqueued": False,
            "cancel_requested": False,
            "finalized": False,
            "items_total": len(items),
            "counts": {"queued": len(items)},
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
            if run.get("enqueued"):
                return run, False
        for item in items:
            try:
                self.store.create_item(_item_doc(item))
            except Conflict:
                pass  # a replay finishing an interrupted submit
        for item in items:
            self.queue.send(item)
        run = self._update_run(run_id, lambda r: r.update(enqueued=True))
        return run, created

    def get_run(self, run_id: str) -> Doc:
        run = self.store.get_run(run_id)
        items = self.store.list_items(run_id)
        results = {r["item_id"]: r for r in self.store.list_results(run_id)}
        return {
            **_public_run(run),
            "items": [_public_item(i, results.get(i["id"])) for i in items],
            "aggregate": _strip(self.store.get_aggregate(run_id)),
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

    def cancel(self, run_id: str) -> Doc:
        """Queued items are marked cancelled now and dropped by whichever agent receives
        them; running items are stopped at the agent's next heartbeat."""
        run = self.store.get_run(run_id)
        if run["state"] in ("completed", "failed", "cancelled"):
            return _public_run(run)
        self._update_run(run_id, lambda r: r.update(cancel_requested=True))
        for item in self.store.list_items(run_id):
            if item["state"] == "queued":
                self._update_item(run_id, item["id"], _set_state("cancelled", "run cancelled"))
        return _public_run(self._refresh(run_id))

    # ---- agent protocol ---------------------------------------------------------------

    def claim(self, item: WorkItem, *, agent_id: str, dequeue_count: int) -> ClaimDecision:
        """Decide whether an agent that just received ``item`` should run it."""
        try:
            run = self.store.get_run(item.run_id)
            doc = self.store.get_item(item.run_id, item.item_id)
        except NotFound:
            return ClaimDecision("drop", "unknown run or item")
        if doc["state"] in TERMINAL_ITEM_STATES:
            return ClaimDecision("drop", f"item already {doc['state']}")
        if run.get("cancel_requested"):
            self._update_item(item.run_id, item.item_id, _set_state("cancelled", "run cancelled"))
            self._refresh(item.run_id)
            return ClaimDecision("drop", "run cancelled")
        if dequeue_count > self.max_deliveries:
            last = doc["errors"][-1]["message"] if doc.get("errors") else "no error reported"
            reason = (
                f"moved to the poison queue after {dequeue_count - 1} deliveries; "
                f"last error: {last}"
            )
            self.queue.send_poison(item.pool, item.model_dump_json())
            self._update_item(item.run_id, item.item_id, _set_state("failed", reason))
            self._refresh(item.run_id)
            return ClaimDecision("drop", reason)

        def start(d: Doc) -> None:
            d.update(
                state="running",
                agent_id=agent_id,
                attempts=dequeue_count,
                started_at=now_iso(),
                heartbeat_at=now_iso(),
            )

        self._update_item(item.run_id, item.item_id, start)
        self._refresh(item.run_id)
        return ClaimDecision("run")

    def heartbeat(self, run_id: str, item_id: str, agent_id: str) -> dict[str, bool]:
        run = self.store.get_run(run_id)
        self._update_item(run_id, item_id, lambda d: d.update(heartbeat_at=now_iso()))
        return {"cancel": bool(run.get("cancel_requested"))}

    def report_failure(self, run_id: str, item_id: str, agent_id: str, message: str) -> None:
        """A failed attempt: recorded, and the item waits for redelivery (or the poison queue)."""

        def fail(d: Doc) -> None:
            errors = list(d.get("errors", []))[-9:]
            errors.append({"at": now_iso(), "agent_id": agent_id, "message": message[:2000]})
            d.update(errors=errors)
            if d["state"] == "running":
                d["state"] = "queued"

        self._update_item(run_id, item_id, fail)
        self._refresh(run_id)

    def report_cancelled(self, run_id: str, item_id: str, agent_id: str) -> None:
        self._update_item(run_id, item_id, _set_state("cancelled", f"stopped by {agent_id}"))
        self._refresh(run_id)

    def store_result(self, body: Any) -> bool:
        """Store one client's result once. Returns False when it was already stored."""
        result = validate("result", body, Result)
        if result.id != result.item_id:
            raise ValidationFailed([FieldError("id", "must equal item_id")])
        doc = self.store.get_item(result.run_id, result.item_id)  # NotFound -> 404
        created = self.store.create_result(result.model_dump(mode="json"))
        if doc["state"] != "completed":

            def done(d: Doc) -> None:
                d.update(state="completed", ended_at=now_iso(), agent_id=result.agent_id)

            self._update_item(result.run_id, result.item_id, done)
            self._refresh(result.run_id)
        return created

    # ---- timer ------------------------------------------------------------------------

    def finalize_runs(self) -> list[str]:
        """Aggregate every run whose items have all ended; mark it completed or failed.

        The aggregate's id is the run id, so two timers racing store it once; the run
        document is then updated by compare-and-swap.
        """
        done = []
        for run in self.store.active_runs():
            if run.get("finalized") or run.get("cancel_requested"):
                continue
            items = self.store.list_items(run["id"])
            if not all_items_terminal(i["state"] for i in items):
                continue
            results = self.store.list_results(run["id"])
            agg = build_aggregate(run, items, results)
            self.store.create_aggregate(agg)
            self._update_run(run["id"], lambda r: r.update(finalized=True))
            self._refresh(run["id"])
            done.append(run["id"])
        return done

    # ---- internals --------------------------------------------------------------------

    def _update_run(self, run_id: str, change: Callable[[Doc], None]) -> Doc:
        for _ in range(CAS_ATTEMPTS):
            doc = self.store.get_run(run_id)
            change(doc)
            doc["updated_at"] = now_iso()
            try:
                return self.store.replace_run(doc)
            except Conflict:
                continue
        raise BenchError(f"run {run_id} kept changing under us")

    def _update_item(self, run_id: str, item_id: str, change: Callable[[Doc], None]) -> Doc:
        for _ in range(CAS_ATTEMPTS):
            doc = self.store.get_item(run_id, item_id)
            change(doc)
            try:
                return self.store.replace_item(doc)
            except Conflict:
                continue
        raise BenchError(f"item {item_id} kept changing under us")

    def _refresh(self, run_id: str) -> Doc:
        items = self.store.list_items(run_id)
        states = [i["state"] for i in items]
        counts: dict[str, int] = {}
        for s in states:
            counts[s] = counts.get(s, 0) + 1
        reasons = [i["reason"] for i in items if i["state"] == "failed" and i.get("reason")]

        def apply(r: Doc) -> None:
            r["state"] = derive_run_state(
                states,
                cancel_requested=bool(r.get("cancel_requested")),
                finalized=bool(r.get("finalized")),
            )
            r["counts"] = counts
            r["error"] = reasons[0] if reasons else None

        return self._update_run(run_id, apply)


def build_aggregate(run: Doc, items: list[Doc], results: list[Doc]) -> Doc:
    by_item = {r["item_id"]: r for r in results}
    samples = [sample_from_result(by_item[i["id"]]) for i in items if i["id"] in by_item]
    failed = [
        FailedClient(i["client"], i.get("agent_id"), i.get("reason") or i["state"])
        for i in items
        if i["id"] not in by_item
    ]
    agg = aggregate(samples, failed=failed, expected_clients=len(items))
    return {
        "id": run["id"],
        "run_id": run["id"],
        "target": run["target"],
        "created_at": now_iso(),
        **agg,
    }


def sample_from_result(doc: Doc) -> ClientSample:
    r = Result.model_validate({k: v for k, v in doc.items() if not k.startswith("_")})
    w = r.workload
    in_flight = w.numjobs * (w.iodepth if w.ioengine in ("libaio", "io_uring", "posixaio") else 1)
    dirs: dict[Direction, DirectionResult] = {}
    if r.read is not None:
        dirs["read"] = r.read
    if r.write is not None:
        dirs["write"] = r.write
    return ClientSample(
        client=r.client, dirs=dirs, series=r.series, agent_id=r.agent_id, outstanding_ios=in_flight
    )


def _item_doc(item: WorkItem) -> Doc:
    return {
        "id": item.item_id,
        "run_id": item.run_id,
        "step": item.step,
        "client": item.client,
        "state": "queued",
        "agent_id": None,
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


def _strip(doc: Doc | None) -> Doc | None:
    if doc is None:
        return None
    return {k: v for k, v in doc.items() if not k.startswith("_")}


_RUN_PUBLIC = (
    "id",
    "state",
    "created_at",
    "updated_at",
    "target",
    "pool",
    "tags",
    "request",
    "items_total",
    "counts",
    "error",
    "cancel_requested",
)


def _public_run(doc: Doc) -> Doc:
    return {k: doc.get(k) for k in _RUN_PUBLIC}


def _public_item(doc: Doc, result: Doc | None) -> Doc:
    out = {
        k: doc.get(k)
        for k in (
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
        )
    }
    out["result"] = result_summary(result) if result else None
    return out


def result_summary(doc: Doc) -> Doc:
    """A result without fio's raw JSON and histogram bins, which can run to megabytes."""
    out: Doc = {
        k: doc[k]
        for k in ("agent_id", "engine_version", "started_at_ms", "ended_at_ms", "host", "mount")
        if k in doc
    }
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
