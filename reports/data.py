"""What a report shows, gathered once from the service's own views and artifacts (no Azure
SDK: the store and blob adapters come in through ``RunService``).

The per-second points are computed by the same functions the aggregate uses
(``core.timeline``), so a chart and the API's figures cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from core.artifacts import unpack_json
from core.counters import CounterPoint, CounterSeries
from core.errors import NotFound
from core.models import Direction, Result
from core.models.target_facts import RunTargetFacts
from core.runs.service import RunService
from core.timeline import (
    DIRECTIONS,
    ClientTimeline,
    LatencyKind,
    Window,
    common_window,
    has_histograms,
    histogram_in,
    overlap,
    per_second,
    seconds_of,
    totals_in,
)

Doc = dict[str, Any]


class SecondPoint(BaseModel):
    t_ms: float  # the second's end, Unix ms
    iops: float
    bw_bytes: float


class ClientSeries(BaseModel):
    """One client's per-second figures over its own measured period."""

    client: int
    agent_id: str | None
    series: dict[Direction, list[SecondPoint]]


class ClientCounters(BaseModel):
    client: int
    agent_id: str | None
    points: list[CounterPoint]


class ClientGridRow(BaseModel):
    """One client's IOPS (all directions) in each second of the step's grid; None where
    the second lies outside its measured period."""

    client: int
    agent_id: str | None
    iops: list[float | None]


class StepData(BaseModel):
    step: int
    clients: list[ClientSeries]
    window: Window | None  # the common window (shaded)
    # All clients summed, per second over the span from the first start to the last end.
    total: dict[Direction, list[SecondPoint]]
    # The merged latency histogram of the common window: (bucket value ns, I/Os), of
    # total latency where every client has it, else of completion latency.
    histogram: dict[Direction, list[tuple[int, float]]]
    histogram_kind: LatencyKind = "clat"
    counters: list[ClientCounters]
    # Every client on one grid of seconds from the step's first start (ends, Unix ms).
    grid_t: list[float] = []
    grid: list[ClientGridRow] = []


class RunReport(BaseModel):
    run: Doc  # as GET /api/runs/{id} answers
    curves: Doc  # as GET /api/runs/{id}/curves answers
    steps: list[StepData]
    # The targets' facts and limits as recorded when the run was submitted.
    target_facts: RunTargetFacts | None = None
    generated_at: str


class SeriesReport(BaseModel):
    history: Doc  # as GET /api/series/{key} answers
    generated_at: str


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _points(rows: list[dict[str, float]]) -> list[SecondPoint]:
    return [SecondPoint(**r) for r in rows]


def _counters(svc: RunService, run_id: str, item_id: str) -> list[CounterPoint]:
    try:
        data = unpack_json(svc.lifecycle.artifacts.get(run_id, item_id, "counters"))
    except NotFound:
        return []
    return CounterSeries.model_validate(data).points


def step_data(svc: RunService, run_id: str, number: int, results: Sequence[Result]) -> StepData:
    mine = sorted((r for r in results if r.step == number), key=lambda r: r.client)
    timelines: dict[str, ClientTimeline] = svc.lifecycle.timelines(run_id, mine)
    clients = [
        ClientSeries(client=r.client, agent_id=r.agent_id, series=_own_series(tl))
        for r in mine
        if (tl := timelines.get(r.item_id)) is not None
    ]
    counters = [
        ClientCounters(
            client=r.client, agent_id=r.agent_id, points=_counters(svc, run_id, r.item_id)
        )
        for r in mine
        if "counters" in r.artifacts
    ]
    tls = list(timelines.values())
    window = common_window(tls)
    total, histogram, kind = _step_series(tls, window)
    grid_t, grid = _client_grid(mine, timelines)
    return StepData(
        step=number,
        clients=clients,
        window=window,
        total=total,
        histogram=histogram,
        histogram_kind=kind,
        counters=counters,
        grid_t=grid_t,
        grid=grid,
    )


def _own_series(tl: ClientTimeline) -> dict[Direction, list[SecondPoint]]:
    """A client's IOPS and bytes in each second of its own measured period."""
    own = (tl.start_ms, tl.end_ms)
    return {d: _points(per_second([tl], d, own)) for d in DIRECTIONS if tl.direction(d) is not None}


def _step_series(
    tls: list[ClientTimeline], window: Window | None
) -> tuple[
    dict[Direction, list[SecondPoint]], dict[Direction, list[tuple[int, float]]], LatencyKind
]:
    """The clients' summed seconds over the whole step, and their latency histogram in the
    common window (total latency where every client has it, else completion)."""
    total: dict[Direction, list[SecondPoint]] = {}
    histogram: dict[Direction, list[tuple[int, float]]] = {}
    kind: LatencyKind = "lat"
    if not tls:
        return total, histogram, kind
    span = (min(t.start_ms for t in tls), max(t.end_ms for t in tls))
    live = [d for d in DIRECTIONS if any(t.direction(d) is not None for t in tls)]
    if not all(has_histograms(t, d, "lat") for t in tls for d in live if t.direction(d)):
        kind = "clat"
    for d in live:
        total[d] = _points(per_second(tls, d, span))
        merged = window_histogram(tls, d, window, kind) if window is not None else {}
        if merged:
            histogram[d] = sorted(merged.items())
    return total, histogram, kind


def _client_grid(
    results: Sequence[Result], timelines: dict[str, ClientTimeline]
) -> tuple[list[float], list[ClientGridRow]]:
    tls = [timelines[r.item_id] for r in results if r.item_id in timelines]
    if not tls:
        return [], []
    seconds = seconds_of((min(t.start_ms for t in tls), max(t.end_ms for t in tls)))
    rows = []
    for r in results:
        tl = timelines.get(r.item_id)
        if tl is None:
            continue
        iops: list[float | None] = []
        for part in seconds:
            if overlap(part, (tl.start_ms, tl.end_ms)) == 0:
                iops.append(None)
                continue
            ios = sum(totals_in(tl, d, part)[0] for d in DIRECTIONS)
            iops.append(ios / ((part[1] - part[0]) / 1000))
        rows.append(ClientGridRow(client=r.client, agent_id=r.agent_id, iops=iops))
    return [float(b) for _, b in seconds], rows


def window_histogram(
    timelines: list[ClientTimeline], d: Direction, window: Window, kind: LatencyKind
) -> dict[int, float]:
    """The clients' latency histograms inside the window, summed bucket by bucket (the one
    the aggregate's percentiles come from)."""
    merged: dict[int, float] = {}
    for t in timelines:
        for k, v in histogram_in(t, d, window, kind).items():
            merged[k] = merged.get(k, 0.0) + v
    return merged


def gather_run(svc: RunService, run_id: str) -> RunReport:
    """Everything a run's report shows; raises NotFound for an unknown run."""
    run = svc.get_run(run_id).model_dump(mode="json")
    curves = svc.curves(run_id).model_dump(mode="json")
    results = svc.store.results.of_run(run_id)
    steps = [step_data(svc, run_id, s["step"], results) for s in run["steps"]]
    facts = svc.store.runs.get(run_id).target_facts
    return RunReport(
        run=run, curves=curves, steps=steps, target_facts=facts, generated_at=now_text()
    )


def series_report(history: Doc) -> SeriesReport:
    return SeriesReport(history=history, generated_at=now_text())
