"""A run's step aggregates (pure): scaling efficiency only against the 1-client step of the
same workload, start skew against the step's common instant."""

from __future__ import annotations

import pytest

from core.analysis.step_aggregates import build_aggregates
from core.models import (
    DirectionResult,
    HostFacts,
    LatencyStats,
    OutstandingCheck,
    Result,
    StartInfo,
    WorkItem,
    Workload,
)
from core.models.state import ItemState
from core.models.stored import Item, Run, Step
from core.timeline import ClientTimeline, DirectionTimeline

RUN = "r-" + "a" * 32
T0 = 1_800_000_000_000


def result(step: int, client: int, iops: float, workload: Workload, start_ms: int) -> Result:
    stats = LatencyStats(min=1, max=1, mean=100_000, stddev=0)
    d = DirectionResult(
        io_bytes=int(iops * 4096 * 4),
        total_ios=int(iops * 4),
        runtime_ms=4000,
        iops=iops,
        bw_bytes=iops * 4096,
        lat_ns=stats,
        clat_ns=stats,
        clat_percentiles_ns={},
        clat_bins_ns={"100000": int(iops * 4)},
    )
    item = f"{RUN}.s{step}.c{client}"
    return Result(
        id=item,
        run_id=RUN,
        item_id=item,
        step=step,
        client=client,
        agent_id=f"agent-{client}",
        engine="fio",
        engine_version="fio-3.33",
        targets=["scratch"],
        workload=workload,
        started_at_ms=start_ms,
        ended_at_ms=start_ms + 4000,
        read=d,
        start=StartInfo(scheduled_ms=start_ms, released_ms=start_ms, skew_ms=0.0),
        host=HostFacts(hostname="h", kernel="k", os="o", cpu_count=2),
        mounts=[],
    )


def timeline(iops: float, start_ms: int) -> ClientTimeline:
    return ClientTimeline(
        start_ms=start_ms,
        end_ms=start_ms + 4000,
        read=DirectionTimeline(ios=[iops] * 4, bytes=[iops * 4096] * 4),
    )


def sweep_run(
    points: list[tuple[int, int, float]],
) -> tuple[Run, list[Step], list[Item], list[Result], dict[str, ClientTimeline]]:
    """(iodepth, clients, IOPS per client) per step, one after another."""
    base = Workload(rw="randread", bs="4k", size="8m", runtime=4)
    steps, items, results, timelines = [], [], [], {}
    for number, (depth, clients, per_client) in enumerate(points):
        w = base.model_copy(update={"iodepth": depth})
        start = T0 + number * 10_000
        steps.append(
            Step(
                id=f"{RUN}.s{number}",
                run_id=RUN,
                step=number,
                clients=clients,
                mode="measure",
                point=f"iodepth={depth}",
                workload=w,
                start_at_ms=start,
            )
        )
        for c in range(clients):
            item = f"{RUN}.s{number}.c{c}"
            work = WorkItem(
                run_id=RUN,
                item_id=item,
                step=number,
                client=c,
                clients=clients,
                pool="p",
                targets=["scratch"],
                engine="fio",
                workload=w,
            )
            items.append(
                Item(
                    id=item,
                    run_id=RUN,
                    step=number,
                    client=c,
                    state=ItemState.COMPLETED,
                    agent_id=f"agent-{c}",
                    work_item=work,
                )
            )
            results.append(result(number, c, per_client, w, start))
            timelines[item] = timeline(per_client, start)
    run = Run.model_validate(
        {
            "id": RUN,
            "created_at": "2031-01-01T00:00:00Z",
            "created_ms": 0,
            "request": {"target": "scratch", "pool": "p"},
            "workload": base,
            "comparison_key": "k",
            "target": "scratch",
            "targets": ["scratch"],
            "pool": "p",
            "step_count": len(points),
            "items_total": len(items),
            "requested_by": {"name": "t", "role": "admin"},
            "body_hash": "h",
        }
    )
    return run, steps, items, results, timelines


def test_an_iodepth_sweep_on_one_client_has_no_scaling_efficiency() -> None:
    """The reported case: every step is 1 client, so none has a 1-client reference of
    another step to be compared with (it printed "vs 1 client: 15%")."""
    aggs = build_aggregates(*sweep_run([(1, 1, 1200), (64, 1, 8000)]), now_ms=T0)
    assert [a.scaling_efficiency for a in aggs] == [None, None]


def test_efficiency_against_the_same_workloads_single_client() -> None:
    aggs = build_aggregates(
        *sweep_run([(1, 1, 1000), (64, 1, 8000), (1, 2, 950), (64, 2, 6000)]), now_ms=T0
    )
    by_step = {a.step: a for a in aggs}
    assert by_step[2].scaling_efficiency == pytest.approx(1900 / 2000)
    assert by_step[3].scaling_efficiency == pytest.approx(12000 / 16000)
    assert by_step[2].like_key == by_step[0].like_key != by_step[1].like_key


def test_no_like_step_no_efficiency() -> None:
    aggs = build_aggregates(*sweep_run([(1, 1, 1000), (64, 2, 6000)]), now_ms=T0)
    assert aggs[1].scaling_efficiency is None


def test_a_client_far_from_the_steps_instant_makes_the_step_partial() -> None:
    """A client re-run after an outage with an instant of its own: 58.8 s from the step's,
    it did not load the target with the others. Left out, named, step partial."""
    run, steps, items, results, timelines = sweep_run([(4, 2, 1000)])
    started = results[1].started_at_ms + 58_808
    start = StartInfo(scheduled_ms=started, released_ms=started, skew_ms=0.0)
    results[1] = results[1].model_copy(update={"started_at_ms": started, "start": start})
    (agg,) = build_aggregates(run, steps, items, results, timelines, now_ms=T0)
    assert agg.partial is True and agg.clients == 1
    (failed,) = agg.failed_clients
    assert failed.client == 1 and "58,808 ms from the step's common instant" in failed.error


def test_a_healthy_diskspd_run_over_ten_files_is_not_flagged_by_littles_law() -> None:
    """The Azure Files profile: 8 threads x 8 outstanding on each of 10 files is 640 I/Os in
    flight. Through the service's own aggregation (issue 11.4: it ignored files per target
    and flagged every healthy run against 64)."""
    run, steps, items, results, timelines = sweep_run([(8, 1, 640_000.0)])
    doc = results[0].model_dump(mode="json")
    doc["engine"] = "diskspd"
    doc["workload"] = {**doc["workload"], "numjobs": 8, "iodepth": 8}
    # 640,000 IOPS at 1 ms each: 640 I/Os in flight, exactly what was kept outstanding.
    doc["read"]["lat_ns"] = doc["read"]["clat_ns"] = {"min": 1, "max": 1, "mean": 1e6, "stddev": 0}
    results[0] = Result.model_validate(doc)
    healthy = run.model_copy(update={"engine": "diskspd", "files_per_target": 10})
    (agg,) = build_aggregates(healthy, steps, items, results, timelines, now_ms=T0)
    law = agg.littles_law
    assert isinstance(law, OutstandingCheck)
    assert law.outstanding_ios == 640 and not law.flagged
    assert law.implied_ios == pytest.approx(640, rel=0.01)
    # Counting one file per target, as before, would have flagged it 10x off.
    (old,) = build_aggregates(
        run.model_copy(update={"engine": "diskspd"}), steps, items, results, now_ms=T0
    )
    assert isinstance(old.littles_law, OutstandingCheck)
    assert old.littles_law.outstanding_ios == 64 and old.littles_law.flagged
