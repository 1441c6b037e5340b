"""The agent's local work directory (job files, fio's output and logs, the start FIFO):
one per process, held with an exclusive flock for the process's life.

Two agents started with the same id on one host would otherwise share
``<tmp>/benchagent-<id>/``: one removing an item's directory while the other's fio writes
its logs there. Each process gets ``<tmp>/benchagent-<id>/p<pid>/`` and holds
``p<pid>/.lock``; the kernel drops the lock when the process dies, however it dies, so a
directory whose lock can be taken is a dead process's, and is removed at start.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)
LOCK = ".lock"


class WorkDirBusy(RuntimeError):
    pass


def _try_lock(path: Path) -> int | None:
    """An fd holding an exclusive flock on ``path`` (created if missing), or None when
    another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


class WorkRoot:
    """This process's work directory, locked until ``close`` or the process ends."""

    def __init__(self, parent: Path, pid: int | None = None) -> None:
        self.parent = parent
        self.path = parent / f"p{pid if pid is not None else os.getpid()}"
        self._fd: int | None = None

    def open(self) -> WorkRoot:
        self.path.mkdir(parents=True, exist_ok=True)
        fd = _try_lock(self.path / LOCK)
        if fd is None:
            raise WorkDirBusy(f"{self.path} is held by another process")
        self._fd = fd
        # A directory of the same name left by a dead process (its pid reused): emptied.
        for entry in self.path.iterdir():
            if entry.name != LOCK:
                shutil.rmtree(entry, ignore_errors=True)
        self.remove_stale()
        return self

    def remove_stale(self) -> list[Path]:
        """Remove the work directories of processes that are gone (their lock is free)."""
        removed = []
        for d in sorted(self.parent.glob("p*")):
            if d == self.path or not d.is_dir() or not (d / LOCK).exists():
                continue  # not a work directory, or one whose process is starting
            fd = _try_lock(d / LOCK)
            if fd is None:
                continue  # a live process holds it
            try:
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d)
                log.info("removed %s: left by an agent process that is gone", d)
            finally:
                os.close(fd)
        return removed

    def close(self) -> None:
        if self._fd is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            os.close(self._fd)
            self._fd = None

    def __truediv__(self, name: str) -> Path:
        return self.path / name
