"""Runs DiskSpd for one work item on a Windows agent: the typed workload becomes an argv
list (core.diskspd.command_line), DiskSpd runs without a shell, its -Rxml output is parsed
into the same result schema as fio's."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from agent.fio_runner import stop_process
from core.diskspd import command_line
from core.models import Workload


@dataclass(frozen=True)
class DiskSpdOutcome:
    returncode: int
    xml: str
    stderr: str
    launched_s: float


class DiskSpdProcess:
    def __init__(
        self,
        workload: Workload,
        *,
        targets: list[str],
        work_dir: Path,
        files_per_target: int = 1,
        binary: str = "diskspd.exe",
    ) -> None:
        self.work_dir = work_dir
        self._argv = [
            binary,
            *command_line(workload, targets=targets, files_per_target=files_per_target)[1:],
        ]
        self._proc: subprocess.Popen[bytes] | None = None
        self._launched = 0.0

    def start(self) -> float:
        """DiskSpd has no start gate like fio's exec_prerun: it is launched at the instant
        and its start-up counts in the skew it reports. Returns the launch instant, Unix ms."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with (
            (self.work_dir / "diskspd.xml").open("wb") as out,
            (self.work_dir / "diskspd.stderr").open("wb") as err,
        ):
            self._launched = time.time()
            self._proc = subprocess.Popen(
                self._argv, cwd=self.work_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=err
            )
        return self._launched * 1000

    def poll(self) -> int | None:
        assert self._proc is not None
        return self._proc.poll()

    def stop(self, grace_s: float = 5.0) -> None:
        stop_process(self._proc, grace_s)

    def collect(self) -> DiskSpdOutcome:
        assert self._proc is not None
        rc = self._proc.wait()
        xml = (self.work_dir / "diskspd.xml").read_text(errors="replace")
        err = (self.work_dir / "diskspd.stderr").read_text(errors="replace")
        return DiskSpdOutcome(rc, xml, err, self._launched)
