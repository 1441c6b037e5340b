"""Every fio process the agent starts ends with it, in each phase. The measured run is
covered end to end (test_e2e.py::test_sigkill_mid_fio_redelivers_and_writes_one_result);
here the fill, slowed down by a real blkio throttle so that it is still writing when its
"agent" (a forked child running FioProcess.fill) is SIGKILLed."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.fio_runner import FioProcess
from core.engines.fio_job import fill_job_file, job_file
from core.models import Workload
from tests.conftest import wait_until
from tests.test_e2e import alive

BLKIO = Path("/sys/fs/cgroup/blkio")


def fio_processes(marker: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes()
        except OSError:
            continue
        pid = int(cmdline.parent.name)
        if marker.encode() in text and text.startswith(b"fio") and alive(pid):
            found.append(pid)
    return found


@pytest.fixture
def throttled(tmp_path: Path) -> Iterator[Path]:
    """A blkio cgroup (v1) that holds direct writes to tmp_path's disk to 8 MB/s."""
    group = BLKIO / f"benchsvc-test-{os.getpid()}"
    group.mkdir()
    dev = os.stat(tmp_path).st_dev
    (group / "blkio.throttle.write_bps_device").write_text(
        f"{os.major(dev)}:{os.minor(dev)} {8 << 20}"
    )
    yield group
    for pid in (group / "cgroup.procs").read_text().split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_until(lambda: not (group / "cgroup.procs").read_text().strip(), 10, what="cgroup empty")
    group.rmdir()


def test_every_job_file_runs_jobs_as_threads(tmp_path: Path) -> None:
    w = Workload(numjobs=4)
    dirs = {"scratch": str(tmp_path)}
    for job in (
        job_file(w, directories=dirs, log_prefix=str(tmp_path / "b")),  # layout, measured
        job_file(
            w, directories=dirs, log_prefix=str(tmp_path / "b"), start_fifo=str(tmp_path / "g")
        ),
        fill_job_file(w, directories=dirs),
    ):
        assert "thread=1" in job.splitlines()


@pytest.mark.fio
@pytest.mark.timing  # the fill writes 0.5 s after fio starts, and ends 2 s after its agent
def test_fill_dies_with_its_agent(tmp_path: Path, throttled: Path) -> None:
    w = Workload(rw="randread", numjobs=2, size="24m", runtime=1)
    work = tmp_path / "work"
    child = os.fork()
    if child == 0:  # the "agent": joins the throttled group, then fills (48 MiB: ~6 s)
        try:
            (throttled / "cgroup.procs").write_text(str(os.getpid()))
            FioProcess(w, data_dirs={"scratch": tmp_path / "data"}, work_dir=work).fill()
        finally:
            os._exit(0)
    try:
        fio = wait_until(lambda: fio_processes(str(work / "fill.fio")), 10, 0.05, what="fill")
        time.sleep(0.5)
        assert list((tmp_path / "data").glob("scratch.*")), "the fill is writing"
        os.kill(child, signal.SIGKILL)
        killed = time.monotonic()
        # An exiting process loses its command line before it is gone (it may still wait
        # for its in-flight I/O): wait for both.
        wait_until(
            lambda: not fio_processes(str(work / "fill.fio")) and not any(alive(p) for p in fio),
            2,
            0.05,
            what="fill to end",
        )
        assert time.monotonic() - killed < 2
    finally:
        os.waitpid(child, 0)
