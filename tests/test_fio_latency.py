"""Which latency (issue 26.1): total latency (fio's ``lat``: submission + completion) end to
end, on real fio run as the agent runs it (its job file, json+, ``--status-interval``),
checked against fio's own JSON. On tmpfs with libaio the I/O is done while it is
submitted, the case where a completion-only figure misleads most."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from agent.fio_clock import fio_clock
from core.analysis.aggregate import aggregate
from core.engines.fio_job import job_file
from core.engines.fio_logs import final_output, timeline_from_logs
from core.engines.fio_output import directions_from_fio, percentile_from_bins
from core.engines.fio_status import StatusOutput, read_output, with_total_latency
from core.models import Workload
from core.timeline import ClientSample, histogram_in

pytestmark = pytest.mark.fio  # runs real fio itself

SHM = Path("/dev/shm")


@pytest.fixture(scope="module")
def fio_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, StatusOutput]:
    logs = tmp_path_factory.mktemp("latency")
    # A name of its own: runs of the suite in other checkouts use /dev/shm at the same time.
    data = Path(tempfile.mkdtemp(prefix="benchsvc-test-latency-", dir=SHM))
    w = Workload.model_validate(
        {
            "rw": "randread",
            "bs": "4k",
            "iodepth": 4,
            "numjobs": 2,
            "size": "8m",
            "runtime": 3,
            "ioengine": "libaio",
            "direct": False,
        }
    )
    (logs / "job.fio").write_text(
        job_file(
            w,
            directories={"scratch": str(data)},
            log_prefix=str(logs / "bench"),
            clocksource=fio_clock("fio"),  # as the agent names it (agent.fio_clock)
        )
    )
    try:
        argv = ["fio", "--output-format=json+", "--status-interval=1", "--output=fio.json"]
        subprocess.run([*argv, "job.fio"], cwd=logs, check=True, timeout=60)
    finally:
        subprocess.run(["rm", "-rf", str(data)], check=True)
    return logs, read_output((logs / "fio.json").read_text())


def _logs(d: Path, kind: str) -> list[str]:
    return [p.read_text() for p in sorted(d.glob(f"bench_{kind}.*.log"))]


def test_total_latency_is_read_as_fio_reports_it(fio_run: tuple[Path, StatusOutput]) -> None:
    _, output = fio_run
    assert output.final is not None and len(output.status) >= 2
    fio = output.final["jobs"][0]["read"]
    r = directions_from_fio(output.final)["read"]
    assert sum(r.lat_bins_ns.values()) == r.total_ios == fio["total_ios"]
    # Our reading of the bins gives fio's own total-latency percentiles, every one.
    assert r.lat_percentiles_ns == {k: float(v) for k, v in fio["lat_ns"]["percentile"].items()}
    assert r.clat_percentiles_ns == {k: float(v) for k, v in fio["clat_ns"]["percentile"].items()}
    # fio's three kinds: total = submission + completion (means, to fio's rounding).
    assert r.slat_ns is not None
    assert r.lat_ns.mean == pytest.approx(r.slat_ns.mean + r.clat_ns.mean, rel=0.01)
    # Each I/O's total is its completion plus its submission: every percentile is higher.
    for key, value in r.clat_percentiles_ns.items():
        assert r.lat_percentiles_ns[key] >= value, key


def test_window_total_latency_from_status_outputs(fio_run: tuple[Path, StatusOutput]) -> None:
    """The window's total-latency histogram, from fio's status outputs, holds every I/O of
    fio's json+ total-latency histogram bucket by bucket, so its percentiles are fio's; a
    window inside the run is its brute-force overlap with the status intervals."""
    d, output = fio_run
    assert output.final is not None
    tl = with_total_latency(
        timeline_from_logs(
            _logs(d, "iops"),
            _logs(d, "bw"),
            _logs(d, "clat_hist"),
            final=final_output(output.final),
        ),
        output,
    )
    assert tl is not None and tl.read is not None and tl.read.lat_rows
    fio = output.final["jobs"][0]["read"]
    whole = histogram_in(tl, "read", (tl.start_ms, tl.end_ms), "lat")
    assert {str(k): round(v, 6) for k, v in whole.items() if round(v, 6)} == {
        k: float(v) for k, v in fio["lat_ns"]["bins"].items()
    }
    agg = aggregate(
        [ClientSample(client=0, dirs=directions_from_fio(output.final), timeline=tl)]
    ).model_dump()
    a = agg["read"]
    assert a["lat_percentiles_basis"] == "common-window" and a["lat_percentiles_exact"]
    for name, key in (("p50", "50.000000"), ("p99", "99.000000"), ("p99.9", "99.900000")):
        assert a["lat_ns"][name] == fio["lat_ns"]["percentile"][key], name
        assert a["clat_ns"][name] == fio["clat_ns"]["percentile"][key], name
    assert a["lat_ns"]["p50"] > a["clat_ns"]["p50"]
    assert a["slat_mean_ns"] + a["clat_mean_ns"] == pytest.approx(a["lat_mean_ns"], rel=0.01)

    # Brute force over a window from 0.7 s to 2.2 s: each status interval's difference of
    # cumulative bins, spread over the interval, the part inside the window.
    window = (tl.start_ms + 700, tl.start_ms + 2200)
    stamps = [s.t_ms for s in output.status if tl.start_ms < s.t_ms < tl.end_ms]
    cumulative = [s.bins["read"] for s in output.status if s.t_ms in stamps]
    final = {int(k): int(v) for k, v in fio["lat_ns"]["bins"].items()}
    expected: dict[int, float] = {}
    previous: dict[int, int] = {}
    for a0, b0, bins in zip(
        [tl.start_ms, *stamps], [*stamps, tl.end_ms], [*cumulative, final], strict=True
    ):
        share = max(0, min(b0, window[1]) - max(a0, window[0])) / (b0 - a0)
        for k, v in bins.items():
            expected[k] = expected.get(k, 0.0) + (v - previous.get(k, 0)) * share
        previous = dict(bins)
    got = histogram_in(tl, "read", window, "lat")
    assert {k: round(v, 6) for k, v in got.items() if round(v, 6)} == {
        k: round(v, 6) for k, v in expected.items() if round(v, 6)
    }
    assert percentile_from_bins(got, 99.0) == percentile_from_bins(expected, 99.0)
