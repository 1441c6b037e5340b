"""Runs fio for one work item: writes the job file, starts fio without a shell, and
collects its JSON output and per-second logs."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
import select
import shutil
import subprocess
import tarfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.engines.fio_job import ClockSource, fill_files, fill_job_file, job_file, parked_fifo
from core.engines.fio_metadata import metadata_job_file
from core.engines.fio_status import Snapshot, read_output, status_interval_s
from core.models import FillInfo, Workload

log = logging.getLogger(__name__)


def _die_with_agent() -> list[str]:
    """A prefix that makes the kernel kill fio when the agent dies, even by SIGKILL, so a
    crashed agent leaves no load running against the target. util-linux's setpriv sets
    PR_SET_PDEATHSIG and execs; preexec_fn would do the same but is unsafe with threads.

    The signal reaches fio's own process only: its jobs run as threads of it (the job
    file's ``thread=1``, core.engines.fio_job), never as forked processes that would be orphaned.
    It fires when the *thread* that started fio ends (prctl(2), PR_SET_PDEATHSIG), so fio
    is started only from the thread that runs the item (the worker loop), never from a
    helper thread that may end first."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


PROC = Path("/proc")
# While fio starts up: how often the agent counts its jobs' gate shells when no job's gate
# has said it is there (each says so on the parked FIFO, core.engines.fio_job), and checks
# that fio has not exited.
PARKED_CHECK_S = 0.05


def parked_children(process: Path) -> int | None:
    """The children of all of a process's threads (``process``: its /proc directory). A
    thread that ends while they are counted (fio's start-up threads do) counts none; None
    when the process is gone or its main thread lists no children file."""
    main = process / "task" / process.name / "children"
    if not main.exists():
        return None
    try:
        tasks = list((process / "task").iterdir())
    except OSError:
        return None
    total = 0
    for task in tasks:
        try:
            total += len((task / "children").read_text().split())
        except OSError:
            continue  # the thread ended meanwhile
    return total


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:100]


@dataclass(frozen=True)
class FioOutcome:
    returncode: int
    doc: dict[str, Any] | None
    iops_logs: list[str]
    bw_logs: list[str]
    hist_logs: list[str]
    stderr: str
    notes: str = ""  # what fio wrote to --output before the JSON (its error lines)
    # fio's status outputs before the final one (total latency per interval)
    status: list[Snapshot] = field(default_factory=list)


def stop_process(proc: subprocess.Popen[bytes] | None, grace_s: float = 5.0) -> None:
    """fio and DiskSpd stop cleanly on SIGTERM and write their output; SIGKILL if not
    within ``grace_s``."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class FillFailed(RuntimeError):
    pass


def _notes(output: Path) -> str:
    """The lines fio wrote to its --output file before the JSON: with --output, some of
    its error messages go there rather than to stderr (e.g. "ENOSPC on laying out file")."""
    try:
        text = output.read_text(errors="replace")
    except OSError:
        return ""
    start = text.find("{")
    return text[:start] if start >= 0 else text


def _marker_valid(marker: Path, size: int) -> bool:
    try:
        record = json.loads(marker.read_text())["files"]
        return all(
            os.stat(f).st_ino == r["inode"] and os.stat(f).st_size >= size
            for f, r in record.items()
        ) and bool(record)
    except (OSError, ValueError, KeyError, TypeError):
        return False


class FioProcess:
    def __init__(
        self,
        workload: Workload,
        *,
        data_dirs: Mapping[str, Path],
        work_dir: Path,
        fio_binary: str = "fio",
        read_files: Mapping[str, Sequence[str]] | None = None,
        clocksource: ClockSource | None = None,
    ) -> None:
        self.work_dir = work_dir
        self.data_dirs = dict(data_dirs)  # mounts whose files this agent lays out
        # Read-only mounts: per alias, the data set files the jobs read (agent.dataset).
        self.read_files = {a: list(f) for a, f in (read_files or {}).items()}
        self._out = work_dir / "fio.json"
        self._err = work_dir / "fio.stderr"
        self._job = work_dir / "job.fio"
        self._prefix = work_dir / "bench"
        self._binary = fio_binary
        self._workload = workload
        self._clock = clocksource  # named in every job it writes (agent.fio_clock)
        self._proc: subprocess.Popen[bytes] | None = None
        # A dot keeps it from ever matching a job (alias) name: fio takes a non-regular
        # file in its cwd named like the job as the job's file (fio's init.c, add_job).
        self._start_fifo = work_dir / "start.fifo"
        self._start_fd: int | None = None
        self._parked_fifo = Path(parked_fifo(str(self._start_fifo)))
        self._parked_fd: int | None = None

    def fill(self) -> FillInfo:
        """Write the working set once per mount and size (the precondition phase), unless
        a valid marker says it is already written: the same files (by inode) at full size."""
        started = time.monotonic()
        markers, todo = [], {}
        for alias, d in self.data_dirs.items():
            d.mkdir(parents=True, exist_ok=True)
            files = fill_files(self._workload, {alias: str(d)})
            key = hashlib.sha256(json.dumps([files, self._workload.size_bytes]).encode())
            marker = d / f".fill-{key.hexdigest()[:16]}.json"
            markers.append(marker)
            if not _marker_valid(marker, self._workload.size_bytes):
                marker.unlink(missing_ok=True)
                todo[alias] = (d, files, marker)
        if todo:
            self.work_dir.mkdir(parents=True, exist_ok=True)
            job = self.work_dir / "fill.fio"
            job.write_text(
                fill_job_file(
                    self._workload,
                    directories={a: str(v[0]) for a, v in todo.items()},
                    clocksource=self._clock,
                )
            )
            argv = [
                *_die_with_agent(),
                self._binary,
                "--output-format=json",
                f"--output={self.work_dir / 'fill.json'}",
                str(job),
            ]
            done = subprocess.run(
                argv, cwd=self.work_dir, stdin=subprocess.DEVNULL, capture_output=True, text=True
            )
            if done.returncode != 0:
                said = _notes(self.work_dir / "fill.json") + done.stderr
                raise FillFailed(f"fio fill exited {done.returncode}: {said[-1500:]}")
            for _, files, marker in todo.values():
                record = {
                    f: {"inode": os.stat(f).st_ino, "size": os.stat(f).st_size} for f in files
                }
                marker.write_text(json.dumps({"files": record, "filled_at": time.time()}))
        return FillInfo(
            ran=bool(todo),
            seconds=round(time.monotonic() - started, 3),
            marker=",".join(str(m) for m in markers),
        )

    def prepare(self, timeout_s: float | None = None) -> tuple[int, str]:
        """Write the job and lay out its files (``--create_only=1``: fio's setup phase and
        nothing else), so the measured start does not wait for file creation."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        for d in self.data_dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        self._job.write_text(
            job_file(
                self._workload,
                directories={a: str(d) for a, d in self.data_dirs.items()},
                log_prefix=str(self._prefix),
                clocksource=self._clock,
            )
        )
        argv = [
            *_die_with_agent(),
            self._binary,
            "--create_only=1",
            "--output-format=json",
            f"--output={self.work_dir / 'prepare.json'}",
            str(self._job),
        ]
        done = subprocess.run(
            argv,
            cwd=self.work_dir,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        for log in self.work_dir.glob("bench_*.log"):
            log.unlink()  # the setup pass logs nothing worth keeping
        return done.returncode, _notes(self.work_dir / "prepare.json") + done.stderr

    def start(self) -> None:
        """Launch the measured run, each job parked on the start FIFO until ``release``.

        The agent keeps the FIFO open read-write, so fio's jobs open it at once and block in
        their read; lines written later wait in the pipe for jobs that come late.
        """
        self.work_dir.mkdir(parents=True, exist_ok=True)  # no layout ran on read-only mounts
        for fifo in (self._start_fifo, self._parked_fifo):
            fifo.unlink(missing_ok=True)
            os.mkfifo(fifo, 0o600)
        self._start_fd = os.open(self._start_fifo, os.O_RDWR | os.O_NONBLOCK)
        # Read-write too: a gate's write never waits for a reader, nor fails for want of one.
        self._parked_fd = os.open(self._parked_fifo, os.O_RDWR | os.O_NONBLOCK)
        job = self.work_dir / "run.fio"
        if self._workload.metadata is not None:
            # A metadata phase: data_dirs are the mounts' tree roots (agent.metadata).
            text = metadata_job_file(
                self._workload,
                roots={a: str(d) for a, d in self.data_dirs.items()},
                log_prefix=str(self._prefix),
                start_fifo=str(self._start_fifo),
                clocksource=self._clock,
            )
        else:
            text = job_file(
                self._workload,
                directories={a: str(d) for a, d in self.data_dirs.items()},
                log_prefix=str(self._prefix),
                start_fifo=str(self._start_fifo),
                read_files=self.read_files,
                clocksource=self._clock,
            )
        job.write_text(text)
        # With a read-only mount fio itself refuses any write, trim or extend (HOWTO,
        # "--readonly"): a safety net under the agent's own checks and the job's reads.
        readonly = ["--readonly"] if self.read_files else []
        # Its json+ output every interval while it runs: the total-latency histogram of
        # each interval (core.engines.fio_status; fio's histogram log is completion only).
        measured_s = self._workload.ramp_time + self._workload.runtime
        argv = [
            *_die_with_agent(),
            self._binary,
            *readonly,
            "--output-format=json+",
            f"--status-interval={status_interval_s(measured_s)}",
            f"--output={self._out}",
            str(job),
        ]
        with self._err.open("wb") as err:
            self._proc = subprocess.Popen(
                argv,
                cwd=self.work_dir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    @property
    def output(self) -> Path:
        """fio's --output: its status outputs while it runs, then its final output."""
        return self._out

    @property
    def jobs(self) -> int:
        return self._workload.numjobs * (len(self.data_dirs) + len(self.read_files))

    def parked_jobs(self, proc: Path = PROC) -> int | None:
        """How many of fio's jobs wait on the start FIFO: each runs its ``read`` in a shell
        of its own (exec_prerun, system()), a child of one of fio's threads. None when fio
        has exited or the kernel does not list children (/proc/PID/task/TID/children)."""
        assert self._proc is not None
        return parked_children(proc / str(self._proc.pid))

    def wait_parked(self, timeout_s: float) -> bool:
        """Wait until every job waits on the start FIFO (fio has started up and opened its
        files), so the start instant need not leave time for that: each job's gate says so
        on the parked FIFO; without a word for PARKED_CHECK_S, its gate shells are counted.
        False on timeout or when fio exited."""
        assert self._parked_fd is not None, "start() opens it"
        deadline = time.monotonic() + timeout_s
        heard = 0
        while self.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            said, _, _ = select.select([self._parked_fd], [], [], min(left, PARKED_CHECK_S))
            if said:
                with contextlib.suppress(BlockingIOError):
                    heard += os.read(self._parked_fd, 4096).count(b"\n")  # a line per job
                if heard >= self.jobs:
                    return True
                continue
            parked = self.parked_jobs()  # None: the kernel cannot tell, the words will
            if parked is not None and parked >= self.jobs:
                return True
        return False

    def release(self) -> float:
        """Release the jobs: one line per fio job into the start FIFO. Returns the instant,
        Unix ms."""
        assert self._start_fd is not None
        os.write(self._start_fd, b"\n" * self.jobs)
        return time.time() * 1000

    def _close_start_fifo(self) -> None:
        if self._parked_fd is not None:
            # Gone first, as the start FIFO: a gate that has not written to it yet would
            # otherwise wait for ever for a reader; now it writes a file and goes on.
            self._parked_fifo.unlink(missing_ok=True)
            os.close(self._parked_fd)
            self._parked_fd = None
        if self._start_fd is not None:
            # Gone first: a job's gate shell that has not opened it yet would otherwise find
            # no writer once it is closed and wait on it for ever (fio stopped while it is
            # still starting up); now its open fails at once.
            self._start_fifo.unlink(missing_ok=True)
            os.close(self._start_fd)  # jobs still waiting read EOF and go on (then stop)
            self._start_fd = None

    def poll(self) -> int | None:
        assert self._proc is not None
        return self._proc.poll()

    def stop(self, grace_s: float = 5.0) -> None:
        self._close_start_fifo()
        stop_process(self._proc, grace_s)

    def collect(self) -> FioOutcome:
        assert self._proc is not None
        rc = self._proc.wait()
        self._close_start_fifo()
        doc, notes, status = None, "", []
        if self._out.exists():
            # fio may print notes before its JSON; its status outputs come before the final.
            output = read_output(self._out.read_text(errors="replace"))
            doc, notes, status = output.final, output.notes, output.status
        iops = [p.read_text() for p in sorted(self.work_dir.glob("bench_iops.*log"))]
        bw = [p.read_text() for p in sorted(self.work_dir.glob("bench_bw.*log"))]
        hist = [p.read_text() for p in sorted(self.work_dir.glob("bench_clat_hist.*log"))]
        stderr = self._err.read_text(errors="replace") if self._err.exists() else ""
        return FioOutcome(rc, doc, iops, bw, hist, stderr, notes, status)

    def logs_archive(self) -> bytes:
        """The job file, fio's output (its status outputs with the final one) and every log
        fio wrote, as a gzip'd tar: the raw evidence kept beside the result."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            kept = [self.work_dir / "run.fio", self._out, *self.work_dir.glob("bench_*.log")]
            for path in sorted(kept):
                if path.exists():
                    tar.add(path, arcname=path.name)
        return buffer.getvalue()
