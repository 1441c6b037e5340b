"""The DiskSpd parser on a real capture from a public project: PerfKitBenchmarker's
tests/data/diskspd_result.xml (DiskSpd 2.0.21a; source and licence in
tests/data/diskspd/SOURCES.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.analysis.aggregate import aggregate
from core.engines.diskspd_xml import parse_xml, sample_from_xml

PKB = Path(__file__).parent / "data" / "diskspd" / "pkb-diskspd_result.xml"


def text() -> str:
    return PKB.read_text()


def test_real_capture_from_perfkitbenchmarker() -> None:
    """PerfKitBenchmarker's capture (tests/data/diskspd/SOURCES.md). References: the counts
    summed by regular expressions here, and PKB's own test of this file, which reads it as
    3030 read IOPS and 189 MB/s (its figures truncated to integers)."""
    doc = text()
    reads = sum(int(v) for v in re.findall(r"<ReadCount>(\d+)</ReadCount>", doc))
    nbytes = sum(int(v) for v in re.findall(r"<ReadBytes>(\d+)</ReadBytes>", doc))
    assert (reads, nbytes) == (90_970, 5_961_809_920)
    assert nbytes == reads * 65_536
    r = parse_xml(doc)
    assert r.version == "2.0.21a" and r.test_time_s == 30.02
    assert set(r.dirs) == {"read"}  # no writes: -w0
    read = r.dirs["read"]
    assert (read.total_ios, read.io_bytes, read.runtime_ms) == (reads, nbytes, 30_020)
    assert read.iops == pytest.approx(reads / 30.02, rel=1e-3)
    assert read.bw_bytes == pytest.approx(nbytes / 30.02, rel=1e-3)
    assert int(read.iops) == 3030 and int(read.bw_bytes / 2**20) == 189  # PKB's figures
    # Neither -L nor -D was given (<MeasureLatency>/<CalculateIopsStdDev> false): no
    # latency, no percentiles, no per-second series.
    assert not r.has_latency and read.clat_percentiles_ns == {} and r.series == {}
    assert r.outstanding_ios == 4 * 2  # <ThreadsPerFile>4 x <RequestCount>2
    t = r.timing
    assert (t.warmup_s, t.duration_s, t.cooldown_s, t.test_time_s) == (5, 30, 0, 30.02)
    assert t.run_time_unix_s == 1_539_898_744  # 2018/10/18 21:39:04 UTC (date -u +%s)


def test_real_capture_aggregates_as_whole_run_with_inexact_percentiles() -> None:
    out = aggregate([sample_from_xml(text(), client=0, label="pkb-044ffc87-0")]).model_dump()
    assert out["basis"] == "whole-run"  # no -D series: the whole-run figures
    read = out["read"]
    assert read["iops"] == pytest.approx(90_970 / 30.02, rel=1e-3)
    assert read["bw_bytes"] == pytest.approx(5_961_809_920 / 30.02, rel=1e-3)
    assert read["percentiles_exact"] is False
    assert not read["clat_ns"]["p99"]  # no -L: nothing to report
    assert "write" not in out  # a direction without I/O is left out


def test_real_capture_gives_the_clients_cpu_from_cpu_utilization() -> None:
    """DiskSpd's <CpuUtilization> is the Windows client's CPU counter (what bound the run).
    References: the per-CPU rows averaged by regular expressions here, and DiskSpd's own
    identities Usage = User + Kernel and Usage + Idle = 100."""
    doc = text()
    span = doc.split("<CpuUtilization>", 1)[1].split("<Average>", 1)[0]
    per_cpu = [float(v) for v in re.findall(r"<UsagePercent>([\d.]+)</UsagePercent>", span)]
    assert per_cpu == [2.08, 2.03, 1.67, 7.03]  # <ProcCount>4
    counters = parse_xml(doc).counters
    assert counters is not None and counters.cpu is not None
    cpu = counters.cpu
    assert cpu.source == "diskspd"
    assert cpu.busy_pct_mean == pytest.approx(sum(per_cpu) / 4, abs=0.005)  # 3.20
    assert cpu.busy_pct_mean == pytest.approx(cpu.user_pct_mean + cpu.system_pct_mean)
    assert (cpu.user_pct_mean, cpu.system_pct_mean) == (0.25, 2.95)
    assert cpu.busiest_cpu_pct == 7.03  # CPU 3: one core does most of the completions
    # DiskSpd gives one figure for the measured time: no per-second maximum, and Windows
    # has no iowait or steal: unknown, not zero.
    assert (cpu.busy_pct_max, cpu.iowait_pct_mean, cpu.steal_pct_mean) == (None, None, None)
    assert counters.seconds == 30 and counters.net is None and counters.nfs == []


def test_the_diskspd_cpu_tells_what_bound_a_windows_step() -> None:
    """The client-CPU ceiling reads a DiskSpd run's CPU as it reads a fio run's."""
    from core.analysis.ceilings import ClientFacts, cpu_ceiling

    counters = parse_xml(
        (PKB.parent / "with-latency-and-iops.xml").read_text()
    ).counters  # written for this project in DiskSpd's format: 4 CPUs, 19.23 % busy
    (ceiling,) = cpu_ceiling(
        [ClientFacts(client=0, agent_id="win-0", vm_size=None, cpu_count=4, counters=counters)]
    )
    assert (ceiling.kind, ceiling.limit, ceiling.measured) == ("client-cpu", 100.0, 19.23)
    assert "DiskSpd" in ceiling.rule
    assert counters is not None and counters.cpu is not None
    assert counters.cpu.busiest_cpu_pct == 31.25
