"""Re-captures the fio outputs in this directory (run as root from the repository root:
``.venv/bin/python tests/data/fio-checks/capture.py``). Each job is written by the agent's
own ``core.engines.fio_job.job_file`` and run the way the agent runs it (json+, jobs as threads)."""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from pathlib import Path

from core.engines.fio_job import job_file
from core.models import Workload

HERE = Path(__file__).parent


def run(name: str, w: Workload, directory: Path, *, stop_after_s: float | None = None) -> None:
    with tempfile.TemporaryDirectory() as work:
        job = Path(work) / "job.fio"
        job.write_text(
            job_file(w, directories={"scratch": str(directory)}, log_prefix=f"{work}/bench")
        )
        (HERE / f"{name}.job").write_text(job.read_text().replace(work, "/work"))
        argv = ["fio", "--output-format=json+", f"--output={HERE / name}.json", str(job)]
        with (HERE / f"{name}.stderr").open("wb") as err:
            proc = subprocess.Popen(argv, cwd=work, stdout=subprocess.DEVNULL, stderr=err)
            if stop_after_s is not None:
                time.sleep(stop_after_s)
                proc.send_signal(signal.SIGTERM)
            print(name, "exit", proc.wait())


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        disk = Path(d)
        run("randread-2jobs", Workload(rw="randread", numjobs=2, size="8m", runtime=2), disk)
        run("randrw-70", Workload(rw="randrw", rwmixread=70, size="8m", runtime=2), disk)
        run(
            "stopped-early",
            Workload(rw="randread", size="8m", runtime=10),
            disk,
            stop_after_s=2.5,
        )
        run(
            "steadystate-attained",
            Workload(
                rw="randread",
                size="8m",
                runtime=30,
                rate_iops=2000,
                steadystate={"metric": "iops", "limit_pct": 20, "duration_s": 5},
            ),
            disk,
        )
        # A write that runs out of space: a 32 MiB file laid out sparse (as a failed
        # layout leaves it) on a 16 MiB tmpfs already half full.
        tiny = disk / "tiny"
        tiny.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(tiny)], check=True)
        try:
            (tiny / "filler").write_bytes(b"\1" * (8 << 20))
            with (tiny / "scratch.0.0").open("wb") as f:
                f.truncate(32 << 20)
            run("enospc-write", Workload(rw="randwrite", size="32m", runtime=2), tiny)
        finally:
            subprocess.run(["umount", str(tiny)], check=True)


if __name__ == "__main__":
    main()
