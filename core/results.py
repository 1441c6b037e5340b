"""Assemble one client's normalized Result from fio's outputs (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.diskspdtime import measured_start_s
from core.diskspdxml import parse_xml
from core.fioparse import directions_from_fio, fio_version, measured_window_ms, series_from_logs
from core.models import FillInfo, HostFacts, MountFacts, Result, StartInfo, WorkItem


def build_result(
    item: WorkItem,
    *,
    fio_json: Mapping[str, Any],
    iops_logs: list[str],
    bw_logs: list[str],
    agent_id: str,
    host: HostFacts,
    mounts: list[MountFacts],
    scheduled_ms: int | None = None,
    released_ms: float | None = None,
    fill: FillInfo | None = None,
) -> Result:
    series = series_from_logs(iops_logs, bw_logs)
    dirs = directions_from_fio(fio_json)
    begin, end = measured_window_ms(iops_logs, fio_json, item.workload.runtime)
    start = None
    if scheduled_ms is not None and released_ms is not None:
        # fio's own clock says when I/O began; ramp time is not logged, so subtract it.
        io_start = begin - item.workload.ramp_time * 1000
        start = StartInfo(
            scheduled_ms=scheduled_ms, released_ms=released_ms, skew_ms=io_start - scheduled_ms
        )
    return Result(
        id=item.item_id,
        run_id=item.run_id,
        item_id=item.item_id,
        step=item.step,
        client=item.client,
        agent_id=agent_id,
        engine="fio",
        engine_version=fio_version(fio_json),
        targets=item.targets,
        workload=item.workload,
        started_at_ms=begin,
        ended_at_ms=end,
        read=dirs.get("read"),
        write=dirs.get("write"),
        series=series,
        start=start,
        fill=fill,
        steadystate=_steadystate(fio_json),
        host=host,
        mounts=mounts,
        raw=dict(fio_json),
    )


def _steadystate(doc: Mapping[str, Any]) -> dict[str, Any] | None:
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
) -> Result:
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
    start = None
    if scheduled_ms is not None:
        io_start_ms = (start_s - parsed.timing.warmup_s) * 1000
        start = StartInfo(
            scheduled_ms=scheduled_ms,
            released_ms=launched_s * 1000,
            skew_ms=io_start_ms - scheduled_ms,
        )
    return Result(
        id=item.item_id,
        run_id=item.run_id,
        item_id=item.item_id,
        step=item.step,
        client=item.client,
        agent_id=agent_id,
        engine="diskspd",
        engine_version=parsed.version,
        targets=item.targets,
        workload=item.workload,
        started_at_ms=begin,
        ended_at_ms=end,
        read=parsed.dirs.get("read"),
        write=parsed.dirs.get("write"),
        series=parsed.series,
        start=start,
        host=host,
        mounts=mounts,
        raw={"diskspd_xml": xml},
    )
