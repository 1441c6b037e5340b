"""The agent writes the fio job itself from typed fields; fio accepts every job we write."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from core.engines.fio_job import check_path, job_file
from core.models import Workload


def parse_only(job: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "job.fio"
    path.write_text(job)
    return subprocess.run(["fio", "--parse-only", str(path)], capture_output=True, text=True)


@pytest.mark.fio
@pytest.mark.parametrize("rw", ["read", "write", "randread", "randwrite", "rw", "randrw"])
def test_fio_accepts_the_job(rw: str, tmp_path: Path) -> None:
    w = Workload(rw=rw, bs="64k", iodepth=8, numjobs=4, size="1g", runtime=60, ramp_time=5)
    dirs = {"vdb1": str(tmp_path / "a"), "vdb2": str(tmp_path / "b")}
    job = job_file(w, directories=dirs, log_prefix=str(tmp_path / "bench"))
    r = parse_only(job, tmp_path)
    assert r.returncode == 0, r.stderr
    lines = set(job.splitlines())
    assert {
        "bs=65536",
        "iodepth=8",
        "numjobs=4",
        "size=1073741824",
        "time_based=1",
        "log_unix_epoch=1",
        "log_avg_msec=1000",
    } <= lines
    assert ("rwmixread=50" in lines) == (rw in ("rw", "randrw"))
    assert {
        "[vdb1]",
        f"directory={tmp_path / 'a'}",
        "[vdb2]",
        f"directory={tmp_path / 'b'}",
    } <= lines


@pytest.mark.parametrize("bad", ["relative/dir", "/mnt/a:b", "/mnt/x\nexec_prerun=rm", "/m$x"])
def test_paths_fio_would_misread_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        check_path(bad)


def test_job_holds_only_known_options(tmp_path: Path) -> None:
    job = job_file(
        Workload(rw="randrw"),
        directories={"scratch": str(tmp_path)},
        log_prefix=str(tmp_path / "b"),
    )
    keys = {line.split("=")[0] for line in job.splitlines() if "=" in line}
    assert keys == {
        "ioengine",
        "direct",
        "rw",
        "bs",
        "iodepth",
        "numjobs",
        "size",
        "runtime",
        "ramp_time",
        "time_based",
        "group_reporting",
        "thread",
        "directory",
        "log_avg_msec",
        "log_unix_epoch",
        "write_iops_log",
        "write_bw_log",
        "write_hist_log",
        "log_hist_msec",
        "log_hist_coarseness",
        "lat_percentiles",
        "rwmixread",
    }
    with pytest.raises(ValueError):
        job_file(Workload(), directories={"x]\n[evil": str(tmp_path)}, log_prefix="/tmp/b")


@pytest.mark.fio
def test_rate_and_steady_state_run_in_real_fio(tmp_path: Path) -> None:
    """fio accepts the rate cap and the ss= criterion we write, and reports a verdict that
    the result keeps."""
    import json

    from core.engines.results import _steadystate

    w = Workload(
        rw="randrw",
        rwmixread=70,
        size="4m",
        runtime=6,
        rate_iops=2000,
        steadystate={"metric": "iops", "limit_pct": 50, "duration_s": 5},
    )
    assert "rate_iops=1400,600" in job_file(
        w, directories={"s": str(tmp_path)}, log_prefix=str(tmp_path / "b")
    )
    job = tmp_path / "job.fio"
    job.write_text(
        job_file(w, directories={"s": str(tmp_path / "d")}, log_prefix=str(tmp_path / "b"))
    )
    (tmp_path / "d").mkdir()
    out = tmp_path / "out.json"
    subprocess.run(
        ["fio", "--output-format=json", f"--output={out}", str(job)],
        check=True,
        capture_output=True,
    )
    doc = json.loads(out.read_text())
    verdict = _steadystate(doc)
    assert verdict is not None and "attained" in verdict
    read_iops = doc["jobs"][0]["read"]["iops"]
    assert read_iops <= 1400 * 1.1  # the cap held
