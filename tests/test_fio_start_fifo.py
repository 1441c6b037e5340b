"""fio is started and parked on its start FIFO before the agent reports ready (issue 17.4): the
agent can tell when every job waits there, none does I/O before it is released, and a
layout pass that would find nothing to do is not run."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from agent.fio_runner import FioProcess, parked_children
from agent.layout import lay_out
from core.models import Workload

pytestmark = pytest.mark.fio


def test_every_job_parks_on_the_start_fifo_and_does_no_io_before_release(tmp_path: Path) -> None:
    # 2 s: every job logs at least one whole second (a 1 s job may end before its line).
    w = Workload(rw="randread", bs="4k", size="4m", numjobs=3, runtime=2, direct=False)
    data = {"a": tmp_path / "a", "b": tmp_path / "b"}
    fio = FioProcess(w, data_dirs=data, work_dir=tmp_path / "work")
    lay_out(fio, w, fill=False)
    fio.start()
    try:
        assert fio.wait_parked(10), "every job reaches the start FIFO"
        assert fio.jobs == 6 and fio.parked_jobs() == 6
        time.sleep(0.3)  # parked: still waiting, nothing measured yet
        assert fio.poll() is None
        assert not any((tmp_path / "work").glob("bench_iops.*log")) or all(
            not p.read_text().strip() for p in (tmp_path / "work").glob("bench_iops.*log")
        )
        released = fio.release()
    except BaseException:
        fio.stop()
        raise
    out = fio.collect()
    assert out.returncode == 0 and out.doc is not None
    jobs = out.doc["jobs"]  # the job file reports its jobs as one group
    assert jobs and all(j["read"]["total_ios"] > 0 for j in jobs)
    # The I/O began at the release, not when fio started: each job's first 1 s log line is
    # stamped (Unix ms, log_unix_epoch) a second after its epoch.
    firsts = [int(log.split(",", 1)[0]) for log in out.iops_logs if log.strip()]
    assert len(firsts) == 6
    assert all(abs(t - 1000 - released) < 100 for t in firsts), (firsts, released)


class NoChildrenListed(FioProcess):
    """A kernel that does not list a thread's children (no CONFIG_PROC_CHILDREN): the agent
    cannot count its jobs' gate shells."""

    def parked_jobs(self, proc: Path = Path("/proc")) -> int | None:
        return None


def test_each_jobs_gate_says_it_is_parked(tmp_path: Path) -> None:
    """The agent knows every job waits at the start FIFO from what each job's gate writes
    on the parked FIFO, not by counting its gate shells every 5 ms (issue 29.3: 32 agents
    on 2 cores looking while 32 fio start up)."""
    w = Workload(rw="randread", bs="4k", size="2m", numjobs=3, runtime=1, direct=False)
    fio = NoChildrenListed(w, data_dirs={"a": tmp_path / "a"}, work_dir=tmp_path / "work")
    lay_out(fio, w, fill=False)
    fio.start()
    try:
        assert fio.wait_parked(10), "every job's gate said it is there"
        time.sleep(0.2)
        assert fio.poll() is None  # still parked: the word does not release it
        fio.release()
    except BaseException:
        fio.stop()
        raise
    out = fio.collect()
    assert out.returncode == 0 and out.doc is not None
    assert all(j["read"]["total_ios"] > 0 for j in out.doc["jobs"])
    assert not (tmp_path / "work" / "start.fifo.parked").exists()


def test_a_layout_with_nothing_to_do_runs_no_fio(tmp_path: Path) -> None:
    w = Workload(rw="randread", bs="4k", size="2m", numjobs=2, runtime=1, direct=False)
    data = {"a": tmp_path / "a"}
    first = FioProcess(w, data_dirs=data, work_dir=tmp_path / "w1")
    lay_out(first, w, fill=False)
    assert (tmp_path / "w1" / "prepare.json").exists()  # the first layout ran fio
    files = sorted((tmp_path / "a").iterdir())
    assert len(files) == 2 and all(f.stat().st_size == 2 << 20 for f in files)
    again = FioProcess(w, data_dirs=data, work_dir=tmp_path / "w2")
    lay_out(again, w, fill=False)
    assert not (tmp_path / "w2" / "prepare.json").exists()  # complete files: no fio pass
    # A file cut short is laid out again.
    with files[0].open("r+b") as f:
        f.truncate(1 << 20)
    third = FioProcess(w, data_dirs=data, work_dir=tmp_path / "w3")
    lay_out(third, w, fill=False)
    assert json.loads((tmp_path / "w3" / "prepare.json").read_text())["jobs"]
    assert files[0].stat().st_size == 2 << 20


def test_a_thread_that_ends_while_counted_counts_no_children(tmp_path: Path) -> None:
    """fio's start-up threads come and go: one listed by the directory but gone when its
    file is read must not make the count unknown (CI's rehearsal: the agent, and this
    file's first test, saw 'not parked' for 10 s)."""
    fio = tmp_path / "4242"
    (fio / "task" / "4242").mkdir(parents=True)
    (fio / "task" / "4242" / "children").write_text("")
    for tid, children in (("4243", "5001 "), ("4244", "5002 5003 ")):
        (fio / "task" / tid).mkdir()
        (fio / "task" / tid / "children").write_text(children)
    (fio / "task" / "4245").mkdir()  # ended: its files are gone
    assert parked_children(fio) == 3
    # The main thread lists no children file: the kernel cannot tell.
    (fio / "task" / "4242" / "children").unlink()
    assert parked_children(fio) is None
    # fio has exited.
    assert parked_children(tmp_path / "4300") is None


def _gate_shells(fifo: Path) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if str(fifo).encode() in cmdline:
                found.append(int(proc.name))
    return found


def test_fio_stopped_while_starting_up_leaves_no_gate_shell_waiting(tmp_path: Path) -> None:
    """Stopped before its jobs reach the start FIFO (an item cancelled or failed during
    fio's start-up), no job's gate shell is left waiting on it for a writer that is gone."""
    w = Workload(rw="randread", bs="4k", size="2m", numjobs=4, runtime=1, direct=False)
    fio = FioProcess(w, data_dirs={"a": tmp_path / "a"}, work_dir=tmp_path / "work")
    lay_out(fio, w, fill=False)
    fifo = fio._start_fifo
    for _ in range(5):  # the shells come while fio starts up: stop it at once, more than once
        fio.start()
        fio._close_start_fifo()  # as stop() does first, with no job at the FIFO yet
        deadline = time.monotonic() + 20
        while fio.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        left = _gate_shells(fifo)
        fio.stop(grace_s=1)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        assert not left, "gate shells left waiting on a start FIFO nobody will write"
        assert fio.poll() is not None
