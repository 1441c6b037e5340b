"""A run's live figures per client and in total, per second, from its items' live
samples (pure; GET /api/runs/{id}/live, ``benchctl follow``, the live page).

Each client's seconds are its own fio status intervals (about a second each, on its own
fio's clock). The total adds the clients up on common seconds counted from the step's
measured start (its start instant plus the ramp): each client's interval is spread over the
seconds it overlaps, in proportion to the overlap (its rate assumed even within its second),
and a second is shown once every client's samples cover it whole, so a total never lacks a
client that was simply late to report.

Every figure here is live: named ``live_*``, its latency total latency (submission +
completion, core.latency), the mean over the second's I/Os. A run's final figures come
from fio's final output and logs only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from core.errors import NotFound
from core.models.live import LIVE_RING, LiveDirection, LiveDoc, LiveSample

if TYPE_CHECKING:
    from core.ports import Store

MIB = 1 << 20
# A client's first interval begins when its own gate opened, a few ms after the step's
# start instant: a second counts as covered when no more than this of its start is missing
# (fio did no I/O before its gate opened, so nothing is missed).
START_SLACK_MS = 50
NOTE = (
    "live: relayed from fio's status output while the step runs; the run's figures come "
    "from fio's final output and logs"
)


class LiveDirectionFigures(BaseModel):
    live_iops: float
    live_mib_s: float
    live_lat_mean_ns: float | None = Field(
        description="total latency (submission + completion), mean over the second's I/Os, ns"
    )


class LiveSecond(BaseModel):
    """One second of one client (one fio status interval) or of the total."""

    start_ms: int = Field(description="Unix ms")
    end_ms: int = Field(description="Unix ms")
    live_iops: float
    live_mib_s: float
    live_lat_mean_ns: float | None = Field(
        description="total latency (submission + completion), mean over the second's I/Os "
        "of both directions, ns"
    )
    read: LiveDirectionFigures | None = None
    write: LiveDirectionFigures | None = None


class LiveClient(BaseModel):
    item_id: str
    client: int
    agent_id: str
    seconds: list[LiveSecond] = Field(description="oldest first, at most the last minute")


class LiveView(BaseModel):
    run_id: str
    state: str = Field(description="the run's state")
    step: int | None = Field(description="the step shown (none before any sample arrived)")
    step_clients: int | None = Field(
        None, description="how many clients the step has; the total adds those listed"
    )
    latency: Literal["total"] = Field(
        "total", description="which latency every live_lat figure is (submission + completion)"
    )
    note: str = NOTE
    clients: list[LiveClient]
    total: list[LiveSecond] = Field(
        description="all clients added up per second from the step's measured start; only "
        "seconds every client's samples cover, none until every client of the step reports"
    )


class _Sum:
    """I/Os, bytes and latency-weighted I/Os of one direction over some span."""

    def __init__(self) -> None:
        self.ios = 0.0
        self.bytes = 0.0
        self.lat_ios = 0.0
        self.lat_sum = 0.0

    def add(self, d: LiveDirection, share: float) -> None:
        self.ios += d.ios * share
        self.bytes += d.bytes * share
        if d.lat_mean_ns is not None and d.ios > 0:
            self.lat_ios += d.ios * share
            self.lat_sum += d.lat_mean_ns * d.ios * share

    def figures(self, seconds: float) -> LiveDirectionFigures:
        return LiveDirectionFigures(
            live_iops=round(self.ios / seconds, 1),
            live_mib_s=round(self.bytes / MIB / seconds, 3),
            live_lat_mean_ns=round(self.lat_sum / self.lat_ios, 1) if self.lat_ios else None,
        )


def _second(start_ms: int, end_ms: int, parts: dict[str, _Sum]) -> LiveSecond:
    seconds = (end_ms - start_ms) / 1000
    both = _Sum()
    for p in parts.values():
        both.ios += p.ios
        both.bytes += p.bytes
        both.lat_ios += p.lat_ios
        both.lat_sum += p.lat_sum
    whole = both.figures(seconds)
    return LiveSecond(
        start_ms=start_ms,
        end_ms=end_ms,
        live_iops=whole.live_iops,
        live_mib_s=whole.live_mib_s,
        live_lat_mean_ns=whole.live_lat_mean_ns,
        read=parts["read"].figures(seconds) if "read" in parts else None,
        write=parts["write"].figures(seconds) if "write" in parts else None,
    )


def _parts(s: LiveSample, share: float, into: dict[str, _Sum]) -> None:
    for name, d in (("read", s.read), ("write", s.write)):
        if d is not None:
            into.setdefault(name, _Sum()).add(d, share)


def client_seconds(samples: Sequence[LiveSample]) -> list[LiveSecond]:
    out = []
    for s in samples:
        parts: dict[str, _Sum] = {}
        _parts(s, 1.0, parts)
        out.append(_second(s.start_ms, s.end_ms, parts))
    return out


def _covered(samples: Sequence[LiveSample], start: int, end: int) -> bool:
    """Whether one client's samples cover [start, end) whole (no gap inside, but for up to
    START_SLACK_MS at its start)."""
    reach = start + START_SLACK_MS
    for s in samples:
        if s.start_ms <= reach < s.end_ms:
            reach = s.end_ms
        if reach >= end:
            return True
    return False


def total_seconds(rings: Sequence[Sequence[LiveSample]], origin_ms: int) -> list[LiveSecond]:
    """Every client added up on the seconds counted from ``origin_ms``, each interval
    spread over the seconds it overlaps; only seconds all clients cover whole."""
    rings = [sorted(r, key=lambda s: s.end_ms) for r in rings if r]
    if not rings:
        return []
    first = max(r[0].start_ms for r in rings)
    last = min(r[-1].end_ms for r in rings)
    k0 = max(0, math.ceil((first - START_SLACK_MS - origin_ms) / 1000))
    out = []
    for k in range(k0, (last - origin_ms) // 1000):
        b0, b1 = origin_ms + 1000 * k, origin_ms + 1000 * (k + 1)
        if not all(_covered(r, b0, b1) for r in rings):
            continue
        parts: dict[str, _Sum] = {}
        for ring in rings:
            for s in ring:
                overlap = min(s.end_ms, b1) - max(s.start_ms, b0)
                if overlap > 0:
                    _parts(s, overlap / s.dur_ms, parts)
        out.append(_second(b0, b1, parts))
    return out


def _total(
    rings: Sequence[Sequence[LiveSample]],
    step: int | None,
    origins: dict[int, int] | None,
    size: int | None,
) -> list[LiveSecond]:
    """The step's total on the seconds from its origin (its clients' earliest sample when
    none is known); none until every one of its ``size`` clients reports, since a total of
    some of them would pass for the step's."""
    origin = (origins or {}).get(step) if step is not None else None
    if origin is None and rings:
        origin = min(r[0].start_ms for r in rings)
    everyone = size is None or len(rings) >= size
    return total_seconds(rings, origin) if origin is not None and everyone else []


def live_view(
    run_id: str,
    state: str,
    docs: Sequence[LiveDoc],
    *,
    step: int | None = None,
    origins: dict[int, int] | None = None,
    sizes: dict[int, int] | None = None,
    seconds: int = LIVE_RING,
) -> LiveView:
    """The view of one step (``step``, else the latest with samples): its clients' last
    ``seconds`` seconds and their total on the seconds from ``origins[step]`` (the step's
    measured start, Unix ms; else its clients' earliest sample)."""
    with_samples = [d for d in docs if d.samples]
    if step is None and with_samples:
        step = max(d.step for d in with_samples)
    mine = sorted((d for d in with_samples if d.step == step), key=lambda d: d.client)
    clients = [
        LiveClient(
            item_id=d.id,
            client=d.client,
            agent_id=d.agent_id,
            seconds=client_seconds(d.samples[-seconds:]),
        )
        for d in mine
    ]
    rings = [d.samples for d in mine]
    size = (sizes or {}).get(step) if step is not None else None
    total = _total(rings, step, origins, size)[-seconds:]
    return LiveView(
        run_id=run_id, state=state, step=step, step_clients=size, clients=clients, total=total
    )


def read_view(store: Store, run_id: str, *, step: int | None, seconds: int) -> LiveView:
    """A run's live view as stored: NotFound for an unknown run, or a step it has not."""
    run = store.runs.get(run_id)
    steps, _ = store.items.of_run(run_id)
    if step is not None and step not in {s.step for s in steps}:
        raise NotFound(f"run {run_id} has no step {step}", "step")
    origins = {
        s.step: s.start_at_ms + 1000 * s.workload.ramp_time
        for s in steps
        if s.start_at_ms is not None and s.workload is not None
    }
    sizes = {s.step: s.clients for s in steps}
    docs = store.live.of_run(run_id)
    return live_view(
        run_id, run.state.value, docs, step=step, origins=origins, sizes=sizes, seconds=seconds
    )
