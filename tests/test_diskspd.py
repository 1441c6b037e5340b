"""DiskSpd engine: the parser on hand-written XML in DiskSpd's format (its command lines:
tests/test_diskspd_command.py).

The fixtures in tests/data/diskspd follow what microsoft/diskspd's XmlResultParser.cpp writes
(element names, nesting, number formats); their numbers are chosen so that counts, bytes and
block sizes agree:

- with-latency-and-iops.xml: -b4K -t2 -o8 -r -w30 -d10 -L -D1000, one target, 2 threads;
- no-latency.xml: -b64K -t2 -o4 -si -w0 -d20, two targets (4 threads), neither -L nor -D;
- latency-no-iops.xml: -b8K -t1 -o16 -r -w100 -d15 -L, without -D.

The real capture from PerfKitBenchmarker is tested in tests/test_diskspd_capture.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.analysis.aggregate import aggregate
from core.engines.diskspd_xml import _per_second, parse_xml, sample_from_xml
from core.engines.fio_output import percentile_key

DATA = Path(__file__).parent / "data" / "diskspd"
WITH_ALL = "with-latency-and-iops.xml"
NO_LATENCY = "no-latency.xml"
NO_IOPS = "latency-no-iops.xml"

# Per fixture: measured seconds, and per direction (sum of <*Count>, sum of <*Bytes>).
EXPECTED: dict[str, tuple[float, dict[str, tuple[int, int]]]] = {
    WITH_ALL: (10.00, {"read": (28_012, 28_012 * 4096), "write": (12_004, 12_004 * 4096)}),
    NO_LATENCY: (20.01, {"read": (121_000, 121_000 * 65_536)}),
    NO_IOPS: (15.00, {"write": (45_123, 45_123 * 8192)}),
}

# The per-second sums over both threads of with-latency-and-iops.xml (its <Iops> buckets).
READ_PER_SECOND = [2792, 2810, 2809, 2796, 2798, 2802, 2802, 2798, 2794, 2811]
WRITE_PER_SECOND = [1196, 1202, 1203, 1198, 1199, 1201, 1200, 1198, 1203, 1204]


def text(name: str) -> str:
    return (DATA / name).read_text()


# --------------------------------------------------------------------------- fixtures agree


@pytest.mark.parametrize("name", list(EXPECTED))
def test_fixture_counts_bytes_and_block_size_agree(name: str) -> None:
    """Read by regular expressions, independently of the parser under test."""
    doc = text(name)
    block = int(re.findall(r"<BlockSize>(\d+)</BlockSize>", doc)[0])
    for tag in ("Read", "Write"):
        counts = [int(v) for v in re.findall(rf"<{tag}Count>(\d+)</{tag}Count>", doc)]
        sizes = [int(v) for v in re.findall(rf"<{tag}Bytes>(\d+)</{tag}Bytes>", doc)]
        assert sizes == [c * block for c in counts]
        direction = tag.lower()
        if sum(counts):
            assert (sum(counts), sum(sizes)) == EXPECTED[name][1][direction]
    seconds = float(re.findall(r"<TestTimeSeconds>([\d.]+)</TestTimeSeconds>", doc)[0])
    assert seconds == EXPECTED[name][0]


# --------------------------------------------------------------------------- parser


@pytest.mark.parametrize("name", list(EXPECTED))
def test_iops_and_bandwidth_are_sums_over_test_time(name: str) -> None:
    seconds, directions = EXPECTED[name]
    r = parse_xml(text(name))
    assert r.test_time_s == seconds
    assert r.version == "2.2.0"
    assert set(r.dirs) == set(directions)  # a direction without I/O is left out
    for d, (ios, nbytes) in directions.items():
        result = r.dirs[d]  # type: ignore[index]
        assert result.total_ios == ios
        assert result.io_bytes == nbytes
        assert result.runtime_ms == round(seconds * 1000)
        assert result.iops == pytest.approx(ios / seconds, rel=1e-3)
        assert result.bw_bytes == pytest.approx(nbytes / seconds, rel=1e-3)
        assert result.clat_bins_ns == {}


def test_latency_percentiles_in_ns_under_fio_keys() -> None:
    r = parse_xml(text(WITH_ALL))
    assert r.has_latency
    read, write = r.dirs["read"], r.dirs["write"]
    expected_read_ms = {50.0: 2.931, 90.0: 5.260, 99.0: 5.835, 99.9: 9.812, 99.99: 15.377}
    for p, ms in expected_read_ms.items():
        assert read.clat_percentiles_ns[percentile_key(p)] == ms * 1e6
    assert write.clat_percentiles_ns[percentile_key(99.9)] == 10_400_000.0
    assert write.clat_percentiles_ns["99.999900"] == 27_118_000.0
    # DiskSpd's 1..99 and 99.9 to 99.999999; 0 and 100 are min and max, and 99.9999999
    # would read "100.000000" at fio's six decimals.
    keys = set(read.clat_percentiles_ns)
    assert {percentile_key(float(p)) for p in range(1, 100)} <= keys
    assert "100.000000" not in keys and "0.000000" not in keys
    assert len(keys) == 99 + 6
    assert read.lat_ns.min == 412_000.0 and read.lat_ns.max == 31_002_000.0
    assert read.lat_ns.mean == 3_900_000.0 and read.lat_ns.stddev == 1_220_000.0
    assert write.lat_ns.mean == 4_200_000.0 and write.lat_ns.max == 27_118_000.0
    assert read.clat_ns == read.lat_ns  # DiskSpd times issue to completion: one figure


def test_write_only_latency_without_iops_series() -> None:
    r = parse_xml(text(NO_IOPS))
    assert r.has_latency and r.series == {}
    write = r.dirs["write"]
    assert write.lat_ns.mean == 5_318_000.0 and write.lat_ns.stddev == 2_104_000.0
    assert write.lat_ns.min == 801_000.0 and write.lat_ns.max == 33_276_000.0
    assert write.clat_percentiles_ns[percentile_key(99.99)] == 21_530_000.0


def test_mean_falls_back_to_per_target_figures_pooled_by_count() -> None:
    doc = re.sub(
        r"\s*<Average(Read|Write|Total)Milliseconds>[^<]*</Average\w+>", "", text(WITH_ALL)
    )
    r = parse_xml(doc)
    # Threads: 14010 reads at 3.881 ms and 14002 at 3.919 ms -> 3.900 ms (to rounding).
    assert r.dirs["read"].lat_ns.mean == pytest.approx(3_900_000.0, abs=1_000)
    assert r.dirs["read"].lat_ns.stddev == pytest.approx(1_220_000.0, abs=1_000)
    assert r.dirs["write"].lat_ns.mean == pytest.approx(4_200_000.0, abs=1_000)


def test_without_latency_flag_stats_are_zero_and_percentiles_empty() -> None:
    r = parse_xml(text(NO_LATENCY))
    assert not r.has_latency
    read = r.dirs["read"]
    assert read.clat_percentiles_ns == {}
    assert read.lat_ns.mean == read.lat_ns.max == read.clat_ns.stddev == 0.0
    assert r.series == {}
    assert r.outstanding_ios == 2 * 2 * 4  # 2 targets x 2 threads x -o4


def test_series_sums_threads_per_second_with_relative_seconds() -> None:
    r = parse_xml(text(WITH_ALL))
    assert set(r.series) == {"read", "write"}
    read, write = r.series["read"], r.series["write"]
    assert [p.t for p in read] == list(range(1, 11))
    assert [p.iops for p in read] == READ_PER_SECOND
    assert [p.iops for p in write] == WRITE_PER_SECOND
    assert [p.bw_bytes for p in read] == [v * 4096 for v in READ_PER_SECOND]
    # Buckets and counters agree: the series carries every measured I/O.
    assert sum(p.iops for p in read) == r.dirs["read"].total_ios
    assert sum(p.iops for p in write) == r.dirs["write"].total_ios


def test_series_placed_in_time_by_start() -> None:
    r = parse_xml(text(WITH_ALL), start_unix_s=1_700_000_000)
    assert [p.t for p in r.series["read"]] == list(range(1_700_000_001, 1_700_000_011))


def test_series_from_the_merged_section_when_targets_have_none() -> None:
    doc = re.sub(
        r"\s*<Iops>(?:(?!</Iops>).)*</Iops>(?=\s*</Target>)", "", text(WITH_ALL), flags=re.S
    )
    assert doc.count("<Iops>") == 1
    r = parse_xml(doc)
    assert [p.iops for p in r.series["read"]] == READ_PER_SECOND


def test_other_bucket_durations_are_resampled_to_seconds() -> None:
    assert _per_second({500: 10.0, 1000: 20.0, 1500: 30.0, 2000: 40.0}, 500) == {1: 15.0, 2: 35.0}
    assert _per_second({2000: 10.0, 4000: 30.0}, 2000) == {1: 10.0, 2: 10.0, 3: 30.0, 4: 30.0}
    assert _per_second({1000: 7.0, 2000: 9.0}, 1000) == {1: 7.0, 2: 9.0}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("diskspd: invalid option", "no <Results>"),
        ("<Results><TimeSpan>", "not well-formed"),
        ('<!DOCTYPE r [<!ENTITY a "b">]><Results/>', "DTD"),
        ("<Results></Results>", "0 measured time spans"),
        (
            "<Results><TimeSpan><Error>The test was interrupted before the measurements "
            "began. No results are displayed.</Error></TimeSpan></Results>",
            "interrupted",
        ),
        ("<Results><TimeSpan><TestTimeSeconds>0.00</TestTimeSeconds></TimeSpan></Results>", "Test"),
    ],
)
def test_refuses_what_is_not_a_usable_result(doc: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_xml(doc)


# --------------------------------------------------------------------------- aggregation


def test_aggregate_marks_percentiles_inexact_and_checks_littles_law() -> None:
    out = aggregate([sample_from_xml(text(WITH_ALL), client=0, label="win-0")]).model_dump()
    assert out["basis"] == "common-window" and out["window"]["seconds"] == 10
    for d in ("read", "write"):
        assert out[d]["percentiles_exact"] is False
    assert out["read"]["iops"] == pytest.approx(2801.2)
    assert out["read"]["clat_ns"]["p99.9"] == 9_812_000.0
    assert out["per_client"][0]["agent_id"] == "win-0"
    # 2 threads x -o8 in flight; IOPS x mean latency says ~16 too.
    assert out["littles_law"]["outstanding_ios"] == 16
    assert not out["littles_law"]["flagged"]


def test_aggregate_two_clients_sums_the_common_window() -> None:
    doc = text(WITH_ALL)
    out = aggregate(
        [sample_from_xml(doc, client=i, label=f"win-{i}", start_unix_s=1_000) for i in (0, 1)]
    ).model_dump()
    assert out["window"]["seconds"] == 10
    assert out["read"]["iops"] == pytest.approx(2 * 2801.2)
    assert out["write"]["bw_bytes"] == pytest.approx(2 * 12_004 * 4096 / 10)


def test_aggregate_without_latency_is_whole_run_and_inexact() -> None:
    out = aggregate([sample_from_xml(text(NO_LATENCY), client=0, label="win-0")]).model_dump()
    assert out["basis"] == "whole-run"
    assert out["read"]["percentiles_exact"] is False
    assert out["read"]["iops"] == pytest.approx(121_000 / 20.01)
