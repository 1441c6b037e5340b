"""One definition of the I/Os a client keeps in flight, for planning and for Little's law,
for fio and DiskSpd (pure)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.analysis.aggregate import aggregate
from core.analysis.concurrency import ASYNC_ENGINES, outstanding_ios, queue_units, shape_for
from core.catalogue import get_profile
from core.models import MAX_IODEPTH, MAX_NUMJOBS, DirectionResult, Engine, LatencyStats, Workload
from core.runs.plan import plan_steps, resolve_dynamic
from core.timeline import ClientSample
from tests.test_catalogue import Reference, request


def test_the_azure_files_profile_keeps_640_ios_in_flight() -> None:
    """10 files x 8 threads x 8 outstanding (DiskSpd -t8 -o8 over 10 files), not 64."""
    p = get_profile("azfiles-diskspd-randwrite-4k")
    assert outstanding_ios("diskspd", p.workload, 1, p.files_per_target) == 640


def test_fio_counts_every_mount_and_ignores_depth_on_sync_engines() -> None:
    w = Workload(numjobs=4, iodepth=16)
    assert outstanding_ios("fio", w, 6) == 6 * 4 * 16
    assert outstanding_ios("fio", w.model_copy(update={"ioengine": "psync"}), 6) == 24
    assert outstanding_ios("fio", w, 6, files_per_target=10) == 6 * 4 * 16  # a DiskSpd notion


def test_a_sized_step_over_six_mounts_keeps_the_planned_total() -> None:
    """target_iops over 6 mounts: the plan's outstanding I/Os in all, not 6 times them."""
    steps = plan_steps(request(target_iops=3500), Workload(numjobs=8, iodepth=8))
    probe = Reference(total_iops=770.0, mean_latency_s=1_300_000 / 1e9)
    sized = resolve_dynamic(steps[1], Workload(ioengine="psync"), probe, mounts=6)
    assert outstanding_ios("fio", sized, 6) == 6  # 5 needed, at least one per mount


engines: st.SearchStrategy[Engine] = st.sampled_from(["fio", "diskspd"])
ioengines = st.sampled_from(["libaio", "io_uring", "psync", "sync", "posixaio"])


@given(
    outstanding=st.integers(1, 50_000),
    clients=st.integers(1, 64),
    mounts=st.integers(1, 16),
    files=st.integers(1, 10),
    engine=engines,
    ioengine=ioengines,
)
def test_the_planned_shape_keeps_at_least_the_outstanding_ios(
    outstanding: int, clients: int, mounts: int, files: int, engine: Engine, ioengine: str
) -> None:
    shape = shape_for(
        outstanding,
        clients,
        engine=engine,
        ioengine=ioengine,
        mounts=mounts,
        files_per_target=files,
    )
    w = Workload(ioengine=ioengine, **shape)
    per_client = outstanding_ios(engine, w, mounts, files)
    units = queue_units(engine, mounts, files)
    at_bounds = shape["numjobs"] == MAX_NUMJOBS and (
        shape["iodepth"] in (1, MAX_IODEPTH) or ioengine not in ASYNC_ENGINES
    )
    assert per_client * clients >= outstanding or at_bounds
    # Never more than one extra I/O per job on each queue beyond the even split.
    needed = max(1, math.ceil(outstanding / (clients * units)))
    assert per_client <= units * (needed + shape["numjobs"])


def _sample(iops: float, lat_ns: float, outstanding: int, cap: float | None) -> ClientSample:
    stats = LatencyStats(min=1, max=1, mean=lat_ns, stddev=0)
    d = DirectionResult(
        io_bytes=0,
        total_ios=100,
        runtime_ms=1000,
        iops=iops,
        bw_bytes=iops * 4096,
        lat_ns=stats,
        clat_ns=stats,
        clat_percentiles_ns={},
        clat_bins_ns={"1": 100},
    )
    return ClientSample(client=0, dirs={"read": d}, outstanding_ios=outstanding, rate_cap_iops=cap)


def test_a_rate_capped_step_is_judged_against_its_cap_not_littles_law() -> None:
    """Capped at 1,000 IOPS with 16 I/Os allowed in flight: 1,000 x 0.1 ms = 0.1 in flight,
    which Little's law would flag; the cap was met, so nothing is flagged."""
    met = aggregate([_sample(1000.0, 100_000, 16, 1000.0)]).model_dump()["littles_law"]
    assert met["mode"] == "rate-cap" and met["flagged"] is False
    assert met["ratio"] == pytest.approx(1.0)
    missed = aggregate([_sample(700.0, 100_000, 16, 1000.0)]).model_dump()["littles_law"]
    assert missed["flagged"] is True and missed["ratio"] == pytest.approx(0.7)
    uncapped = aggregate([_sample(1000.0, 100_000, 16, None)]).model_dump()["littles_law"]
    assert uncapped["mode"] == "outstanding" and uncapped["flagged"] is True
