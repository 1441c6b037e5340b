"""Parsers on real fio output captured here (tests/data/fio-randrw: 2 jobs, randrw 70/30)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.engines.fio_logs import timeline_from_logs
from core.engines.fio_output import (
    directions_from_fio,
    percentile_from_bins,
    percentile_key,
    sum_bins,
)

DATA = Path(__file__).parent / "data" / "fio-randrw"


@pytest.fixture
def doc() -> dict[str, object]:
    data: dict[str, object] = json.loads((DATA / "fio.json").read_text())
    return data


@pytest.mark.parametrize("direction", ["read", "write"])
def test_percentiles_from_bins_reproduce_fio(doc: dict, direction: str) -> None:  # type: ignore[type-arg]
    clat = doc["jobs"][0][direction]["clat_ns"]
    for key, value in clat["percentile"].items():
        assert percentile_from_bins(clat["bins"], float(key)) == value, key


def test_directions_keep_fio_totals(doc: dict) -> None:  # type: ignore[type-arg]
    dirs = directions_from_fio(doc)
    job = doc["jobs"][0]
    for d in ("read", "write"):
        assert dirs[d].total_ios == job[d]["total_ios"]
        assert dirs[d].iops == pytest.approx(job[d]["iops"])
        assert dirs[d].bw_bytes == pytest.approx(job[d]["bw_bytes"])
        assert sum(dirs[d].clat_bins_ns.values()) == job[d]["clat_ns"]["N"]
        assert (
            dirs[d].clat_percentiles_ns[percentile_key(99.0)]
            == (job[d]["clat_ns"]["percentile"]["99.000000"])
        )


def test_timeline_holds_fios_own_io_count(doc: dict) -> None:  # type: ignore[type-arg]
    """Each line is the average rate over the interval that ends at its stamp; summed over
    the client's period, rate x interval is the I/O count fio itself reports."""
    iops = [p.read_text() for p in sorted(DATA.glob("bench_iops.*.log"))]
    bw = [p.read_text() for p in sorted(DATA.glob("bench_bw.*.log"))]
    timeline = timeline_from_logs(iops, bw)
    assert timeline is not None and timeline.read and timeline.write
    job = doc["jobs"][0]  # group_reporting: fio's sum over the two jobs
    for d, dt in (("read", timeline.read), ("write", timeline.write)):
        assert sum(dt.ios) == pytest.approx(job[d]["total_ios"], rel=0.005)
        assert sum(dt.bytes) == pytest.approx(job[d]["io_bytes"], rel=0.005)
    # runtime=3 after a 1 s ramp, which fio does not log: three bins of a second, the last
    # cut where the earlier-ending job stopped logging (2,999 ms after the later start).
    assert [b - a for a, b in timeline.bins()] == [1000, 1000, 999]


def test_sum_bins_and_empty_histogram() -> None:
    assert sum_bins([{"10": 1, "20": 2}, {"20": 3}]) == {"10": 1, "20": 5}
    assert percentile_from_bins({}, 99.0) == 0.0
    assert percentile_from_bins({"100": 1, "200": 1}, 50.0) == 100.0
    assert percentile_from_bins({"100": 1, "200": 1}, 50.1) == 200.0
