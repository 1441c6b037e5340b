"""A finished run's aggregates (over the repositories): built from its results and their
per-second timelines, stored (the series in Blob Storage), and judged by the monitor.
``core.runs.lifecycle`` calls these when ``core.runs.decide`` says ``Finalize``, and to
size a rate-curve or target_iops step from the step it refers to."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from core import telemetry
from core.analysis.step_aggregates import build_aggregates
from core.artifacts import pack_json, sha256_hex, unpack_timeline
from core.errors import NotFound
from core.models import Result, SeriesArtifact, StepAggregate
from core.models.gate import RunGate
from core.models.stored import Item, Run, Step
from core.ports import Artifacts, Store
from core.runs.recorder import RunRecorder
from core.timeline import ClientTimeline

log = logging.getLogger(__name__)
# Timelines fetched at once, each on a kept connection (adapters/transport.py): a thousand
# of them 8 at a time took 4-6 s of the aggregation, 32 at a time 2.4-3.9 s.
FETCH_CONCURRENCY = 32


def timeline(artifacts: Artifacts, run_id: str, item: str) -> ClientTimeline | None:
    try:
        return unpack_timeline(artifacts.get(run_id, item, "timeline"))
    except NotFound:
        log.warning("timeline of %s is missing from Blob Storage", item)
        return None


def timelines(
    artifacts: Artifacts, run_id: str, results: Sequence[Result]
) -> dict[str, ClientTimeline]:
    """The results' timelines from Blob Storage, FETCH_CONCURRENCY at a time: one after
    another, a thousand clients' took most of the aggregation (issue 29)."""
    wanted = [r.item_id for r in results if "timeline" in r.artifacts]
    if len(wanted) <= 1:
        found = [timeline(artifacts, run_id, i) for i in wanted]
    else:
        with ThreadPoolExecutor(min(FETCH_CONCURRENCY, len(wanted)), "timelines") as pool:
            found = list(pool.map(lambda i: timeline(artifacts, run_id, i), wanted))
    return {i: t for i, t in zip(wanted, found, strict=True) if t is not None}


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
        results = store.results.of_run(run.id)
        found = timelines(artifacts, run.id, results)
        aggregates = build_aggregates(run, steps, items, results, found, now_ms=now_ms)
        for agg in aggregates:
            store_aggregate(store, artifacts, agg)
    if monitor is None:
        return None
    with telemetry.span("detect", run.traceparent, run_id=run.id, pool=run.pool):
        return monitor.record(run, aggregates, results).gate


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
