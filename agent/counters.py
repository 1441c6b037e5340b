"""Samples the host's counters once a second on its own thread while the engine runs:
CPU (/proc/stat), bytes per network interface (/proc/net/dev) and the NFS mounts' RPC
statistics (/proc/self/mountstats), parsed by core.counters.

It reads three small files a second and keeps a few numbers per reading, so it does not
disturb fio (measured in tests/test_counters.py). Where /proc does not exist (a
Windows agent) it records nothing: DiskSpd measures the client's CPU itself
(core.engines.diskspd_cpu).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.artifacts import pack_json
from core.counters import (
    Snapshot,
    fio_cpu,
    parse_mountstats,
    parse_net_dev,
    parse_proc_stat,
    series,
    summarize,
)
from core.host_counters import CountersSummary

log = logging.getLogger(__name__)
PROC = Path("/proc")


def _read_all(fd: int) -> str:
    # A /proc file is made anew by each read from offset 0, so an fd kept open reads fresh.
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks).decode()


class ProcFiles:
    """The three files, opened once: a reading is then three reads of open files, about half
    the CPU of opening each anew (tests/test_counters.py measures the sampler's cost)."""

    def __init__(self, proc: Path, with_mounts: bool) -> None:
        self._stat = os.open(proc / "stat", os.O_RDONLY)
        self._net = os.open(proc / "net" / "dev", os.O_RDONLY)
        self._mounts: int | None = None
        if with_mounts:
            try:
                self._mounts = os.open(proc / "self" / "mountstats", os.O_RDONLY)
            except OSError:
                pass

    def snapshot(self, mount_points: Sequence[str]) -> Snapshot:
        t_ms = int(time.time() * 1000)
        cpu = parse_proc_stat(_read_all(self._stat))
        net = parse_net_dev(_read_all(self._net))
        nfs = {}
        if self._mounts is not None:
            try:
                nfs = parse_mountstats(_read_all(self._mounts), mount_points)
            except OSError:
                pass
        return Snapshot(t_ms, cpu, net, nfs)

    def __enter__(self) -> ProcFiles:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in (self._stat, self._net, self._mounts):
            if fd is not None:
                os.close(fd)


class CounterSampler:
    """``start()`` before the engine, ``stop()`` after; then ``summary``/``artifact``."""

    def __init__(
        self, mount_points: Sequence[str], interval_s: float = 1.0, proc: Path = PROC
    ) -> None:
        self.mount_points = list(mount_points)
        self.interval_s = interval_s
        self.proc = proc
        self.snapshots: list[Snapshot] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.thread_cpu_s: float | None = None  # the sampler's own cost, once it has stopped

    @property
    def available(self) -> bool:
        return (self.proc / "stat").exists()

    def start(self) -> CounterSampler:
        if self.available:
            self._thread = threading.Thread(target=self._run, name="counters", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        try:
            files = ProcFiles(self.proc, bool(self.mount_points))
        except OSError as e:
            log.warning("counters not read: %s", e)
            return
        # Sample on a fixed 1 s grid (monotonic), so a slow read does not drift the series.
        next_at = time.monotonic()
        with files:
            while True:
                self._read(files)
                next_at += self.interval_s
                if self._stop.wait(max(0.0, next_at - time.monotonic())):
                    break
            self._read(files)  # a last reading closes the final interval
        self.thread_cpu_s = time.thread_time()

    def _read(self, files: ProcFiles) -> None:
        try:
            self.snapshots.append(files.snapshot(self.mount_points))
        except (OSError, ValueError) as e:
            log.warning("counters not read: %s", e)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def summary(
        self, start_ms: int, end_ms: int, engine_doc: Mapping[str, Any] | None = None
    ) -> CountersSummary | None:
        if len(self.snapshots) < 2:
            return None
        cpu = fio_cpu(engine_doc) if engine_doc is not None else None
        return summarize(series(self.snapshots), start_ms, end_ms, cpu)

    def artifact(self) -> bytes | None:
        if len(self.snapshots) < 2:
            return None
        return pack_json(series(self.snapshots).model_dump(mode="json"))
