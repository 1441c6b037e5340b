"""Scale-out aggregation (pure) and `benchctl aggregate` on real fio output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.analysis.aggregate import FailedClient, aggregate
from core.models import DirectionResult, LatencyStats, SeriesPoint
from core.timeline import ClientSample, common_window, timeline_from_seconds

DATA = Path(__file__).parent / "data"


def reference_percentile(bins: dict[str, int], p: float) -> float:
    """Independent check: the first bucket whose cumulative count reaches p% of all."""
    values = np.array(sorted(int(k) for k in bins), dtype=np.int64)
    counts = np.array([bins[str(v)] for v in values], dtype=np.int64)
    cumulative = np.cumsum(counts)
    return float(values[np.searchsorted(cumulative, p / 100.0 * cumulative[-1], side="left")])


def benchctl_aggregate(path: Path) -> dict[str, Any]:
    """`benchctl aggregate --format json FILE`, as a user runs it."""
    out = subprocess.run(
        [sys.executable, "-m", "benchctl", "aggregate", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    agg: dict[str, Any] = json.loads(out.stdout)
    return agg


@pytest.mark.slow
def test_offline_client_server_matches_fios_all_clients_entry() -> None:
    path = DATA / "fio-client-server-4.json"
    agg = benchctl_aggregate(path)
    doc = json.loads(path.read_text())
    clients = [c for c in doc["client_stats"] if c["jobname"] != "All clients"]
    fios_sum = next(c for c in doc["client_stats"] if c["jobname"] == "All clients")
    assert agg["clients"] == 4 and agg["basis"] == "whole-run"
    for d in ("read", "write"):
        assert agg[d]["iops"] == pytest.approx(fios_sum[d]["iops"], rel=0.005)
        assert agg[d]["bw_bytes"] == pytest.approx(fios_sum[d]["bw_bytes"], rel=0.005)
        summed: dict[str, int] = {}
        for c in clients:
            for k, v in c[d]["clat_ns"]["bins"].items():
                summed[k] = summed.get(k, 0) + v
        for name, p in (("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9)):
            assert agg[d]["clat_ns"][name] == reference_percentile(summed, p), (d, name)
        assert agg[d]["percentiles_exact"] is True


@pytest.mark.slow
def test_offline_bad_input_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "notfio.json"
    bad.write_text('{"hello": 1}')
    r = subprocess.run(
        [sys.executable, "-m", "benchctl", "aggregate", str(bad)], capture_output=True, text=True
    )
    assert r.returncode == 2 and "notfio.json" in r.stderr and "not a fio JSON" in r.stderr


def direction(iops: float, bins: dict[str, int] | None = None) -> DirectionResult:
    bins = bins if bins is not None else {"100000": 10, "200000": 10}
    stats = LatencyStats(min=100000, max=200000, mean=150000, stddev=50000)
    return DirectionResult(
        io_bytes=int(iops * 4096 * 10),
        total_ios=int(iops * 10),
        runtime_ms=10000,
        iops=iops,
        bw_bytes=iops * 4096,
        lat_ns=stats,
        clat_ns=stats,
        clat_percentiles_ns={"50.000000": 100000.0, "99.000000": 200000.0},
        clat_bins_ns=bins,
    )


def client(
    i: int, per_second: list[tuple[int, float]], outstanding_ios: int | None = None
) -> ClientSample:
    """A client whose rate over the second ending at Unix second t is v, for each (t, v)."""
    whole_run = sum(v for _, v in per_second) / len(per_second)
    series = [SeriesPoint(t=t, iops=v, bw_bytes=v * 4096) for t, v in per_second]
    first, last = per_second[0][0], per_second[-1][0]
    timeline = timeline_from_seconds((first - 1) * 1000, last * 1000, {"read": series})
    return ClientSample(
        client=i,
        dirs={"read": direction(whole_run)},
        timeline=timeline,
        outstanding_ios=outstanding_ios,
    )


def test_common_window_excludes_a_late_client_and_the_naive_sum_differs() -> None:
    """A volume capped at 3,600 IOPS: 3 clients get 1,200 each until the 4th, 3 s late,
    joins; then all get 900. Only the 7 seconds with all 4 running are a 4-client figure."""
    t0 = 1_800_000_000
    early = [(t0 + s, 1200.0 if s < 3 else 900.0) for s in range(10)]
    late = [(t0 + s, 900.0 if s < 10 else 1200.0) for s in range(3, 13)]
    samples = [client(0, early), client(1, early), client(2, early), client(3, late)]
    timelines = [s.timeline for s in samples if s.timeline is not None]
    # The seconds ending at t0+3 ... t0+9, in ms: from (t0+2) s to (t0+9) s.
    assert common_window(timelines) == ((t0 + 2) * 1000, (t0 + 9) * 1000)
    agg = aggregate(samples).model_dump()
    assert agg["basis"] == "common-window" and agg["window"]["seconds"] == 7
    assert agg["read"]["iops"] == pytest.approx(3600.0)
    assert [row["t_ms"] for row in agg["series"]["read"]] == [(t0 + s) * 1000 for s in range(3, 10)]
    naive = sum(s.dirs["read"].iops for s in samples)  # the spreadsheet's sum of averages
    assert naive == pytest.approx(3960.0) and naive != pytest.approx(agg["read"]["iops"])
    shares = [c["share"] for c in agg["per_client"]]
    assert shares == pytest.approx([0.25] * 4)


def test_partial_aggregate_names_the_failed_client() -> None:
    t0 = 1_800_000_000
    ok = [(t0 + s, 1000.0) for s in range(5)]
    agg = aggregate(
        [client(0, ok), client(1, ok)],
        failed=[FailedClient(2, "agent-9", "fio exited 1: no space")],
        expected_clients=3,
    ).model_dump()
    assert agg["partial"] is True and agg["clients"] == 2 and agg["clients_expected"] == 3
    assert agg["failed_clients"] == [
        {"client": 2, "agent_id": "agent-9", "error": "fio exited 1: no space"}
    ]


def test_spread_scaling_and_littles_law() -> None:
    t0 = 1_800_000_000
    a = client(0, [(t0 + s, 1000.0) for s in range(5)], outstanding_ios=1)
    b = client(1, [(t0 + s, 3000.0) for s in range(5)], outstanding_ios=1)
    agg = aggregate([a, b], single_client_iops=2500.0).model_dump()
    assert agg["spread"] == {"min": 1000.0, "max": 3000.0, "cv": pytest.approx(0.5)}
    assert agg["scaling_efficiency"] == pytest.approx(4000.0 / (2 * 2500.0))
    # 4,000 IOPS x 150 us mean latency = 0.6 I/Os in flight, not the 2 configured: flagged.
    assert agg["littles_law"]["implied_ios"] == pytest.approx(0.6)
    assert agg["littles_law"]["flagged"] is True
    c = client(0, [(t0 + s, 6666.7) for s in range(5)], outstanding_ios=1)
    assert aggregate([c]).model_dump()["littles_law"]["flagged"] is False


def test_sources_without_bins_say_percentiles_are_approximate() -> None:
    t0 = 1_800_000_000
    s = ClientSample(
        client=0,
        dirs={"read": direction(100.0, bins={})},
        timeline=timeline_from_seconds(
            (t0 - 1) * 1000, t0 * 1000, {"read": [SeriesPoint(t=t0, iops=100, bw_bytes=1)]}
        ),
        has_bins=False,
    )
    agg = aggregate([s]).model_dump()
    assert agg["read"]["percentiles_exact"] is False
    assert agg["read"]["clat_ns"]["p99"] == 200000.0  # the source's own percentile


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["with-latency-and-iops.xml", "latency-no-iops.xml", "no-latency.xml"]
)
def test_offline_diskspd_xml(name: str) -> None:
    """IOPS and bandwidth are the per-thread counts summed over the test time; percentiles
    come from DiskSpd's table and are marked approximate (DiskSpd exports no histogram)."""
    import xml.etree.ElementTree as ET

    path = DATA / "diskspd" / name
    agg = benchctl_aggregate(path)
    root = ET.parse(path).getroot()
    span = root.find("TimeSpan")
    assert span is not None
    seconds = float(span.findtext("TestTimeSeconds") or "0")
    targets = span.findall("Thread/Target")
    for d, key in (("read", "Read"), ("write", "Write")):
        count = sum(int(t.findtext(f"{key}Count") or 0) for t in targets)
        size = sum(int(t.findtext(f"{key}Bytes") or 0) for t in targets)
        if count == 0:
            assert d not in agg or agg[d]["iops"] == 0
            continue
        # With -D the one client's window is its whole per-second series, which covers
        # the test time; without -D the whole-run figures are used: the same either way.
        assert agg[d]["iops"] == pytest.approx(count / seconds, rel=0.001)
        assert agg[d]["bw_bytes"] == pytest.approx(size / seconds, rel=0.001)
        has_latency = span.find("Latency") is not None
        assert agg[d]["percentiles_exact"] is False
        assert (agg[d]["clat_ns"]["p99"] > 0) == has_latency
