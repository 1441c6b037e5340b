"""Samples the host's counters once a second on its own thread while the engine runs:
CPU (/proc/stat), bytes per network interface (/proc/net/dev) and the NFS mounts' RPC
statistics (/proc/self/mountstats), parsed by core.counters.

It reads three small files a second and keeps a few numbers per reading, so it does not
disturb fio (measured in tests/test_counters_agent.py). Where /proc does not exist (a
Windows agent) it records nothing: DiskSpd measures the client's CPU itself
(core.engines.diskspd_cpu).
"""

from __future__ import annotations

import logging
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


def read_snapshot(mount_points: Sequence[str], proc: Path = PROC) -> Snapshot:
    t_ms = int(time.time() * 1000)
    cpu = parse_proc_stat((proc / "stat").read_text())
    net = parse_net_dev((proc / "net" / "dev").read_text())
    nfs = {}
    if mount_points:
        try:
            nfs = parse_mountstats((proc / "self" / "mountstats").read_text(), mount_points)
        except OSError:
            pass
    return Snapshot(t_ms, cpu, net, nfs)


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

    @property
    def available(self) -> bool:
        return (self.proc / "stat").exists()

    def start(self) -> CounterSampler:
        if self.available:
            self._thread = threading.Thread(target=self._run, name="counters", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        # Sample on a fixed 1 s grid (monotonic), so a slow read does not drift the series.
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self.snapshots.append(read_snapshot(self.mount_points, self.proc))
            except (OSError, ValueError) as e:
                log.warning("counters not read: %s", e)
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            if self.available:  # a last reading closes the final interval
                try:
                    self.snapshots.append(read_snapshot(self.mount_points, self.proc))
                except (OSError, ValueError):
                    pass

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
