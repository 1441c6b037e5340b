"""Assemble one client's normalized Result from fio's outputs (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.engines.diskspd_time import measured_start_s
from core.engines.diskspd_xml import parse_xml
from core.engines.fio_output import directions_from_fio, fio_version
from core.models import (
    Direction,
    DirectionResult,
    Engine,
    FillInfo,
    HostFacts,
    MountFacts,
    Result,
    StartInfo,
    WorkItem,
)
from core.models.result import FioJson
from core.timeline import ClientTimeline, timeline_from_seconds


def measured_period_ms(
    timeline: ClientTimeline | None,
    fio_json: Mapping[str, Any],
    runtime_s: int,
    measured_ms: int | None = None,
) -> tuple[int, int]:
    """(start, end) of the measured period in Unix ms: the timeline's, else fio's end
    timestamp minus the runtime (``measured_ms``, fio's own, when the job ended before
    its runtime: a metadata phase that did all its files)."""
    if timeline is not None:
        return timeline.start_ms, timeline.end_ms
    end = int(fio_json.get("timestamp_ms", int(fio_json.get("timestamp", 0)) * 1000))
    return end - (measured_ms if measured_ms is not None else runtime_s * 1000), end


def build_result(
    item: WorkItem,
    *,
    fio_json: Mapping[str, Any],
    timeline: ClientTimeline | None,
    agent_id: str,
    host: HostFacts,
    mounts: list[MountFacts],
    scheduled_ms: int | None = None,
    released_ms: float | None = None,
    fill: FillInfo | None = None,
) -> Result:
    dirs = directions_from_fio(fio_json)
    metadata = item.workload.metadata is not None
    if metadata:
        # fio counts a nominal 4 KiB per metadata operation: no data moved. Its file
        # engines time the whole call as completion latency and leave lat_ns at 0; the
        # operation's latency is that time, its total (Little's law and the means read
        # lat_ns, the percentiles shown by default are total latency's).
        dirs = {
            d: r.model_copy(
                update={
                    "io_bytes": 0,
                    "bw_bytes": 0.0,
                    "lat_ns": r.clat_ns,
                    "lat_percentiles_ns": r.clat_percentiles_ns,
                    "lat_bins_ns": r.clat_bins_ns,
                }
            )
            for d, r in dirs.items()
        }
    fio_ms = max((r.runtime_ms for r in dirs.values()), default=None) if metadata else None
    begin, end = measured_period_ms(timeline, fio_json, item.workload.runtime, fio_ms)
    start = None
    if scheduled_ms is not None and released_ms is not None:
        # fio's own clock says when I/O began; ramp time is not logged, so subtract it.
        io_start = begin - item.workload.ramp_time * 1000
        start = StartInfo(
            scheduled_ms=scheduled_ms, released_ms=released_ms, skew_ms=io_start - scheduled_ms
        )
    return _result(
        item,
        agent_id,
        engine="fio",
        engine_version=fio_version(fio_json),
        period=(begin, end),
        dirs=dirs,
        start=start,
        host=host,
        mounts=mounts,
        fill=fill,
        steadystate=_steadystate(fio_json),
    )


def _result(
    item: WorkItem,
    agent_id: str,
    *,
    engine: Engine,
    engine_version: str,
    period: tuple[int, int],
    dirs: Mapping[Direction, DirectionResult],
    start: StartInfo | None,
    host: HostFacts,
    mounts: list[MountFacts],
    fill: FillInfo | None = None,
    steadystate: FioJson | None = None,
) -> Result:
    """One client's result, whichever engine measured it (id = the item id)."""
    return Result(
        id=item.item_id,
        run_id=item.run_id,
        item_id=item.item_id,
        step=item.step,
        client=item.client,
        agent_id=agent_id,
        engine=engine,
        engine_version=engine_version,
        targets=item.targets,
        workload=item.workload,
        started_at_ms=period[0],
        ended_at_ms=period[1],
        read=dirs.get("read"),
        write=dirs.get("write"),
        start=start,
        fill=fill,
        steadystate=steadystate,
        host=host,
        mounts=mounts,
    )


def _steadystate(doc: Mapping[str, Any]) -> FioJson | None:
    """fio's steady-state verdict (present when ss= was set): attained or not, and why."""
    for job in doc.get("jobs", []):
        if "steadystate" in job:
            return dict(job["steadystate"])
    return None


def build_diskspd_result(
    item: WorkItem,
    *,
    xml: str,
    launched_s: float,
    written_s: float,
    agent_id: str,
    host: HostFacts,
    mounts: list[MountFacts],
    scheduled_ms: int | None = None,
) -> tuple[Result, ClientTimeline | None]:
    """The measured period is placed from DiskSpd's own report (``measured_start_s``: its
    ``<RunTime>``, cool-down and test time, with the instant its XML was written), not from
    the launch plus the workload's ramp: the -D buckets then line up across clients. The
    skew is when DiskSpd's I/O began (measured start less its ``<Warmup>``) against the
    common start, as fio's is."""
    parsed = parse_xml(xml)
    start_s = measured_start_s(parsed.timing, launched_s=launched_s, written_s=written_s)
    parsed = parsed.placed(start_s)
    begin = round(start_s * 1000)
    end = begin + round(parsed.test_time_s * 1000)
    timeline = timeline_from_seconds(begin, end, parsed.series)
    start = None
    if scheduled_ms is not None:
        io_start_ms = (start_s - parsed.timing.warmup_s) * 1000
        start = StartInfo(
            scheduled_ms=scheduled_ms,
            released_ms=launched_s * 1000,
            skew_ms=io_start_ms - scheduled_ms,
        )
    result = _result(
        item,
        agent_id,
        engine="diskspd",
        engine_version=parsed.version,
        period=(begin, end),
        dirs=parsed.dirs,
        start=start,
        host=host,
        mounts=mounts,
    )
    # DiskSpd measures the client's CPU itself (core.engines.diskspd_cpu): the counters of a
    # Windows run, where the agent has no /proc to sample.
    result = result.model_copy(update={"counters": parsed.counters})
    return result, timeline
