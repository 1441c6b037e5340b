"""Runs DiskSpd for one work item on a Windows agent: the typed workload becomes argv lists
(core.engines.diskspd_command), DiskSpd runs without a shell, its -Rxml output is parsed
into the same result schema as fio's.

Two invocations, as fio's ``create_only`` pass and measured run: ``layout`` lays out the
files before the agent reports ready, ``start`` runs the measured load at the common start
on the files as they are (no ``-c``), so the synchronized window holds no file creation.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from agent.fio_runner import stop_process
from core.engines.diskspd_command import command_line, layout_command_line
from core.models import Workload


@dataclass(frozen=True)
class DiskSpdOutcome:
    returncode: int
    xml: str
    stderr: str
    launched_s: float
    written_s: float  # when DiskSpd last wrote its XML (the output file's mtime), Unix s


class DiskSpdProcess:
    def __init__(
        self,
        workload: Workload,
        *,
        targets: list[str],
        work_dir: Path,
        files_per_target: int = 1,
        cooldown_s: int = 0,
        binary: str = "diskspd.exe",
    ) -> None:
        self.work_dir = work_dir
        layout = layout_command_line(workload, targets=targets, files_per_target=files_per_target)
        measured = command_line(
            workload,
            targets=targets,
            files_per_target=files_per_target,
            cooldown_s=cooldown_s,
            create=False,
        )
        self._layout_argv = [binary, *layout[1:]]
        self._argv = [binary, *measured[1:]]
        self._proc: subprocess.Popen[bytes] | None = None
        self._launched = 0.0

    def layout(self, timeout_s: float | None = None) -> tuple[int, str]:
        """Create the files at full size (DiskSpd's ``-c`` with a one-second read), before
        the barrier. Returns DiskSpd's exit status and what it said on failure."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            self._layout_argv,
            cwd=self.work_dir,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        # DiskSpd prints some errors (a file it cannot open) to stdout, others to stderr.
        return done.returncode, done.stderr.strip() or done.stdout.strip()

    def start(self) -> float:
        """Launch the measured run at the common instant. DiskSpd's own start signal (``-yr``, a
        Windows named event) is not used, so its start-up (threads, opening the files) counts
        in the skew it reports. Returns the launch instant, Unix ms."""
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
        out = self.work_dir / "diskspd.xml"
        xml = out.read_text(errors="replace")
        err = (self.work_dir / "diskspd.stderr").read_text(errors="replace")
        # DiskSpd prints its XML in one go after the run (GenerateRequests), so the file's
        # last write marks that instant, unlike the exit, which the agent sees by polling.
        return DiskSpdOutcome(rc, xml, err, self._launched, out.stat().st_mtime)
