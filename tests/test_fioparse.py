"""Parsers on real fio output captured here (tests/data/fio-randrw: 2 jobs, randrw 70/30)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.fioparse import (
    directions_from_fio,
    parse_log,
    percentile_from_bins,
    percentile_key,
    series_from_logs,
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


def test_series_sums_jobs_per_second() -> None:
    iops = [p.read_text() for p in sorted(DATA.glob("bench_iops.*.log"))]
    bw = [p.read_text() for p in sorted(DATA.glob("bench_bw.*.log"))]
    series = series_from_logs(iops, bw)
    assert set(series) == {"read", "write"}
    rows = [r for text in iops for r in parse_log(text) if r[2] == 0]
    assert sum(p.iops for p in series["read"]) == pytest.approx(sum(v for _, v, _ in rows))
    seconds = [p.t for p in series["read"]]
    assert seconds == list(range(seconds[0], seconds[0] + len(seconds)))  # one point a second
    assert len(seconds) == 3  # runtime=3 after a 1 s ramp, which fio does not log


def test_sum_bins_and_empty_histogram() -> None:
    assert sum_bins([{"10": 1, "20": 2}, {"20": 3}]) == {"10": 1, "20": 5}
    assert percentile_from_bins({}, 99.0) == 0.0
    assert percentile_from_bins({"100": 1, "200": 1}, 50.0) == 100.0
    assert percentile_from_bins({"100": 1, "200": 1}, 50.1) == 200.0
