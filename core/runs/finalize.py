"""A finished run's aggregates (over the repositories): built from its results and their
per-second timelines, stored (the series in Blob Storage), and judged by the monitor.
``core.runs.lifecycle`` calls these when ``core.runs.decide`` says ``Finalize``, and to
size a rate-curve or target_iops step from the step it refers to."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from core import telemetry
from core.analysis.step_aggregates import build_aggregates
from core.artifacts import UNREADABLE_TIMELINE, pack_json, sha256_hex, unpack_timeline
from core.errors import NotFound
from core.models import Result, SeriesArtifact, StepAggregate, StoredResult
from core.models.gate import RunGate
from core.models.state import ItemState
from core.models.stored import Item, Run, Step
from core.ports import Artifacts, Store
from core.runs.recorder import RunRecorder
from core.timeline import ClientTimeline

log = logging.getLogger(__name__)
# Timelines fetched at once, each on a kept connection (adapters/transport.py): a thousand
# of them 8 at a time took 4-6 s of the aggregation, 32 at a time 2.4-3.9 s.
FETCH_CONCURRENCY = 32


def timeline(artifacts: Artifacts, run_id: str, item: str) -> ClientTimeline | None:
    found = _fetch(artifacts, run_id, item)
    if found is None:
        log.warning("timeline of %s is missing from Blob Storage", item)
    return found


def _fetch(artifacts: Artifacts, run_id: str, item: str) -> ClientTimeline | None:
    """The item's timeline from Blob Storage; None when it is not there, or not a timeline
    (an upload is not checked as a carried one is): one client's bad blob leaves that client
    out, logged, not the run failed and the last result's request answered 500."""
    try:
        data = artifacts.get(run_id, item, "timeline")
    except NotFound:
        return None
    try:
        return unpack_timeline(data)
    except UNREADABLE_TIMELINE as e:
        log.warning("timeline of %s in Blob Storage is unreadable: %s", item, str(e)[:200])
        return None


def fetch_timelines(
    artifacts: Artifacts, run_id: str, item_ids: Sequence[str]
) -> dict[str, ClientTimeline | None]:
    """The items' timelines from Blob Storage, FETCH_CONCURRENCY at a time (None: missing):
    one after another, a thousand clients' took most of the aggregation (issue 29)."""
    if len(item_ids) <= 1:
        return {i: _fetch(artifacts, run_id, i) for i in item_ids}
    with ThreadPoolExecutor(min(FETCH_CONCURRENCY, len(item_ids)), "timelines") as pool:
        found = list(pool.map(lambda i: _fetch(artifacts, run_id, i), item_ids))
    return dict(zip(item_ids, found, strict=True))


def timeline_of(artifacts: Artifacts, result: Result) -> ClientTimeline | None:
    """The result's timeline: carried in it, or read from Blob Storage (None: none)."""
    if (carried := result.carried_timeline()) is not None:
        return unpack_timeline(carried)
    if "timeline" not in result.artifacts:
        return None
    return timeline(artifacts, result.run_id, result.item_id)


def timelines(
    artifacts: Artifacts,
    run_id: str,
    results: Sequence[Result],
    fetched: dict[str, ClientTimeline | None] | None = None,
) -> dict[str, ClientTimeline]:
    """The timelines the results name: carried in them, or from ``fetched`` (those read
    already) or Blob Storage; one that is missing is logged and left out."""
    wanted = [r.item_id for r in results if "timeline" in r.artifacts]
    have = dict(fetched or {})
    have.update(
        (r.item_id, unpack_timeline(carried))
        for r in results
        if (carried := r.carried_timeline()) is not None
    )
    have.update(fetch_timelines(artifacts, run_id, [i for i in wanted if i not in have]))
    found = {}
    for i in wanted:
        if (t := have.get(i)) is None:
            log.warning("timeline of %s is missing from Blob Storage", i)
        else:
            found[i] = t
    return found


def store_aggregate(store: Store, artifacts: Artifacts, agg: StepAggregate) -> None:
    """The per-second series can outgrow a document: it goes to Blob Storage."""
    if agg.series:
        packed = pack_json(agg.series)
        artifacts.put(agg.run_id, agg.id, "series", packed)
        kept = SeriesArtifact(bytes=len(packed), sha256=sha256_hex(packed))
        agg = agg.model_copy(update={"series_artifact": kept})
    store.results.create_aggregate(agg.model_copy(update={"series": None}))


def aggregate_and_judge(
    store: Store,
    artifacts: Artifacts,
    monitor: RunRecorder | None,
    run: Run,
    steps: list[Step],
    items: list[Item],
    now_ms: int,
) -> RunGate | None:
    """Aggregate every step that ran and tell the monitor; the gate's verdict. Aggregate
    ids are ``<run>.s<step>``, so two callers racing store each once; every write is
    idempotent, so a crash before the run is marked finalized is retried by the timer."""
    with telemetry.span("aggregate", run.traceparent, run_id=run.id, pool=run.pool):
        results, fetched = _results_and_timelines(store, artifacts, run.id, items)
        found = timelines(artifacts, run.id, results, fetched)
        aggregates = build_aggregates(run, steps, items, results, found, now_ms=now_ms)
        for agg in aggregates:
            store_aggregate(store, artifacts, agg)
    if monitor is None:
        return None
    with telemetry.span("detect", run.traceparent, run_id=run.id, pool=run.pool):
        return monitor.record(run, aggregates, results).gate


def _results_and_timelines(
    store: Store, artifacts: Artifacts, run_id: str, items: list[Item]
) -> tuple[list[StoredResult], dict[str, ClientTimeline | None]]:
    """The run's results, and the timelines read from Blob Storage meanwhile: each completed
    item has its result (stored first), and the query of a thousand results took about a
    second of the last result's request (issue 29.2). Not when one result carries its
    timeline: a fleet's agents then carry theirs (agent protocol 3), and a result that
    does not has its timeline read after the query (``timelines``)."""
    ended = [i.id for i in items if i.state == ItemState.COMPLETED]
    if not ended or _carries_timeline(store, run_id, ended[0]):
        return store.results.of_run(run_id), {}
    with ThreadPoolExecutor(1, "results") as one:
        querying = one.submit(contextvars.copy_context().run, store.results.of_run, run_id)
        fetched = fetch_timelines(artifacts, run_id, ended)
        return querying.result(), fetched


def _carries_timeline(store: Store, run_id: str, item_id: str) -> bool:
    try:
        return store.results.get(run_id, item_id).inline_timeline is not None
    except NotFound:
        return False


def step_aggregate(
    store: Store, artifacts: Artifacts, run: Run, number: int, now_ms: int
) -> StepAggregate | None:
    """One step's aggregate, built afresh (not stored): what a dynamic step sizes from."""
    steps, items = store.items.of_run(run.id)
    results = [r for r in store.results.of_run(run.id) if r.step == number]
    aggs = build_aggregates(
        run,
        [s for s in steps if s.step == number],
        [i for i in items if i.step == number],
        results,
        timelines(artifacts, run.id, results),
        now_ms=now_ms,
    )
    return aggs[0] if aggs else None
