"""What callers see of runs, steps, items and results (pure reads over the repositories).

Views leave out what is internal (ETags, message ids, principals) and what is large (fio's
raw output and histogram bins stay in the full result and in Blob Storage).
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from core.analysis.curves import latency_curve, repetition_spread, scaleout_curve
from core.artifacts import unpack_json
from core.errors import NotFound
from core.fleet.usage import run_usage
from core.models.state import FINISHED_RUN, DeliveryState, ItemState, RunState
from core.models.stored import Item, Run, Step
from core.ports import Doc, Store
from core.runs.admission import Admission, lock_keys
from core.runs.guardrails import TargetInfo
from core.runs.lifecycle import Lifecycle
from core.timeline import per_second

FINISHED_VIEWS = 512  # views of finished runs kept in memory (each a few KiB)

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
    "error",
    "cancel_requested",
    "requested_by",
    "provisioning",
    "gate",
)
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
_ITEM_PUBLIC = (
    "id",
    "step",
    "client",
    "state",
    "agent_id",
    "attempts",
    "errors",
    "reason",
    "claimed_at",
    "ready_at",
    "started_at",
    "ended_at",
    "start_at_ms",  # an instant of its own, when it heard its step's too late
    "rebarriered",
)


def public_run(run: Run, items: list[Item] | None = None) -> Doc:
    doc = run.doc()
    out = {k: doc.get(k) for k in _RUN_PUBLIC}
    # A step held while its pool grows is not a delivery in trouble: `provisioning` says it.
    if run.delivery.state == DeliveryState.FAILED or (
        run.delivery.state == DeliveryState.PENDING and run.provisioning is None
    ):
        out["delivery"] = run.delivery.model_dump(mode="json")
    if run.traceparent:  # where an operator finds the run's trace (docs/operations.md)
        out["trace_id"] = run.traceparent.split("-")[1]
    if items is not None:
        counts: dict[str, int] = {}
        for i in items:
            counts[i.state.value] = counts.get(i.state.value, 0) + 1
        out["counts"] = counts
    return out


def public_step(step: Step, aggregate: Doc | None) -> Doc:
    doc = step.doc()
    out = {k: doc.get(k) for k in _STEP_PUBLIC}
    out["aggregate"] = _strip(aggregate)
    return out


def public_item(item: Item, result: Doc | None) -> Doc:
    doc = item.doc()
    out = {k: doc.get(k) for k in _ITEM_PUBLIC}
    out["result"] = result_summary(result) if result else None
    return out


def result_summary(doc: Doc) -> Doc:
    """A result without its histogram bins, which can run to tens of kilobytes."""
    keys = (
        "agent_id",
        "engine_version",
        "started_at_ms",
        "ended_at_ms",
        "start",
        "host",
        "mounts",
        "fill",
        "steadystate",
    )
    out: Doc = {k: doc[k] for k in keys if k in doc}
    for d in ("read", "write"):
        r = doc.get(d)
        if r:
            out[d] = {
                "iops": r["iops"],
                "bw_bytes": r["bw_bytes"],
                "total_ios": r["total_ios"],
                "lat_mean_ns": r["lat_ns"]["mean"],
                "clat_mean_ns": r["clat_ns"]["mean"],
                "slat_mean_ns": (r.get("slat_ns") or {}).get("mean"),
                "lat_ns": _summary_percentiles(r.get("lat_percentiles_ns") or {}) or None,
                "clat_ns": _summary_percentiles(r["clat_percentiles_ns"]),
            }
    return out


def _summary_percentiles(p: Doc) -> Doc:
    if not p:
        return {}
    return {"p50": p.get("50.000000"), "p99": p.get("99.000000"), "p99.9": p.get("99.900000")}


def _strip(doc: Doc | None) -> Doc | None:
    if doc is None:
        return None
    return {k: v for k, v in doc.items() if not k.startswith("_")}


class Views:
    def __init__(
        self,
        store: Store,
        admission: Admission,
        lifecycle: Lifecycle,
        price_of: Callable[[str], float | None] = lambda pool: None,
    ) -> None:
        self.store = store
        self.admission = admission
        self.life = lifecycle
        self.price_of = price_of  # a pool's hourly price per client VM (BENCH_POOLS)
        # A finished run whose items have all ended never changes again but by a write to
        # its own document (which changes its ETag): its view is kept, keyed by that ETag,
        # so reading it again costs one point read instead of four calls.
        self._finished: OrderedDict[str, tuple[str, Doc]] = OrderedDict()
        self._finished_lock = threading.Lock()

    def summary(self, run: Run, items: list[Item] | None = None) -> Doc:
        """The run as its submitter is told: its state, and its place in line if waiting."""
        out = public_run(run, items)
        if run.state == RunState.WAITING:
            out["queue_position"] = self.admission.position(run)
        return out

    def get_run(self, run_id: str) -> Doc:
        run = self.store.runs.get(run_id)
        with self._finished_lock:
            kept = self._finished.get(run_id)
        if kept is not None and run.etag is not None and kept[0] == run.etag:
            return copy.deepcopy(kept[1])  # callers may add to what they are given
        steps, items = self.store.items.of_run(run_id)
        # A result exists only for an item that completed, and aggregates only once the
        # run is finalized: a running run's view reads neither (half the calls of a poll).
        done = any(i.state == ItemState.COMPLETED for i in items)
        results = {r["item_id"]: r for r in self.store.results.of_run(run_id)} if done else {}
        aggregates = (
            {a["step"]: a for a in self.store.results.list_aggregates(run_id)}
            if run.finalized
            else {}
        )
        public_steps = [
            public_step(s, aggregates.get(s.step)) for s in sorted(steps, key=lambda s: s.step)
        ]
        ordered = sorted(items, key=lambda i: (i.step, i.client))
        view = {
            **self.summary(run, items),
            "usage": run_usage(items, self.life.now_ms(), self.price_of(run.pool)),
            "steps": public_steps,
            "items": [public_item(i, results.get(i.id)) for i in ordered],
            "aggregate": public_steps[-1]["aggregate"] if public_steps else None,
        }
        settled = run.finished and not run.due_ms and all(i.ended for i in items)
        if run.state in FINISHED_RUN and settled and run.etag is not None:
            with self._finished_lock:
                self._finished[run_id] = (run.etag, copy.deepcopy(view))
                self._finished.move_to_end(run_id)
                while len(self._finished) > FINISHED_VIEWS:
                    self._finished.popitem(last=False)
        return view

    def list_runs(
        self,
        *,
        target: str | None = None,
        state: str | None = None,
        tag: tuple[str, str] | None = None,
        limit: int = 50,
        continuation: str | None = None,
    ) -> tuple[list[Doc], str | None]:
        runs, token = self.store.runs.page(
            target=target, state=state, tag=tag, limit=limit, continuation=continuation
        )
        return [public_run(r) for r in runs], token

    def curves(self, run_id: str) -> Doc:
        self.store.runs.get(run_id)  # 404 for an unknown run
        aggs = sorted(self.store.results.list_aggregates(run_id), key=lambda a: a["step"])
        return {
            "run_id": run_id,
            "latency": latency_curve(aggs),
            "scaleout": scaleout_curve(aggs),
            "repetitions": repetition_spread(aggs),
        }

    def targets(self, registry: list[TargetInfo]) -> list[Doc]:
        """The target registry with who holds each target and how many wait: one lock
        document read per target."""
        out = []
        for t in registry:
            lock = self.admission.lock_of(lock_keys(t.pool, [t.alias])[0])
            holder = lock.run_id if lock and self.admission.holds(lock, "") else None
            out.append(
                {
                    **t.model_dump(),
                    "busy": holder is not None,
                    "holder": holder,
                    "waiting": len(lock.queue) if lock else 0,
                }
            )
        return out

    def full_result(self, run_id: str, item_id: str, *, common: bool = False) -> Doc:
        """A client's result with its per-second series and the engine's own output, read
        back from Blob Storage. The series covers the client's own measured period, or with
        ``common`` its step's common window, the same seconds for every client of the step
        (``series_window`` says which)."""
        doc: dict[str, Any] = _strip(self.store.results.get(run_id, item_id)) or {}
        names = doc.get("artifacts") or {}
        timeline = self.life.timeline(run_id, item_id) if "timeline" in names else None
        window = (timeline.start_ms, timeline.end_ms) if timeline else None
        doc["series_window"] = "own"
        if common and timeline is not None:
            aggs = self.store.results.list_aggregates(run_id)
            step = next((a for a in aggs if a["step"] == doc.get("step")), None)
            span = (step or {}).get("window")
            if span:
                window = (int(span["start_ms"]), int(span["end_ms"]))
                doc["series_window"] = "common"
        doc["series"] = (
            {
                d: per_second([timeline], d, window)
                for d in ("read", "write")
                if timeline.direction(d) is not None
            }
            if timeline and window
            else {}
        )
        doc["raw"] = None
        if "raw" in names:
            try:
                doc["raw"] = unpack_json(self.life.artifacts.get(run_id, item_id, "raw"))
            except NotFound:  # raw output is kept for a while only (core.retention)
                doc["raw_removed"] = True
        return doc
