"""fio behind the agent's engine interface (agent.engine): lay out (or make the metadata
tree), start fio held at its gate before ready, release it at the step's instant, then
check its output and build the result.

fio and the counter sampler are stopped on every way out (``stop``, which the worker calls
whatever happens).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from agent import metadata
from agent.cleanup import data_dirs as agent_data_dirs
from agent.config import AgentConfig
from agent.counters import CounterSampler
from agent.dataset import read_only_files
from agent.engine import Measured
from agent.fio_runner import FioOutcome, FioProcess
from agent.layout import ItemFailed, lay_out
from agent.live import LiveRelay
from agent.mounts import MountWatch, mount_changes
from core.artifacts import pack_json, pack_timeline
from core.engines.fio_check import (
    fio_messages,
    measurement_problems,
    permanent_failure,
    rejection,
)
from core.engines.fio_job import ClockSource
from core.engines.fio_logs import final_output, timeline_from_logs
from core.engines.fio_status import StatusOutput, with_total_latency
from core.engines.results import build_result
from core.models import ArtifactName, FillInfo, HostFacts, MountFacts, WorkItem

log = logging.getLogger(__name__)
PARK_TIMEOUT_S = 5.0  # fio's start-up before ready; a slower one starts late (its skew shows)


class FioEngine:
    stage = "fio"

    def __init__(
        self,
        item: WorkItem,
        work_dir: Path,
        *,
        config: AgentConfig,
        mounts: MountWatch,
        host: HostFacts,
        fio_binary: str,
        fio_clock: ClockSource | None = None,
    ) -> None:
        self.item = item
        self.work_dir = work_dir
        self._config = config
        self._mounts = mounts
        self._host = host
        self._binary = fio_binary
        self._clock = fio_clock  # the clock fio picks on this host (agent.fio_clock)
        self._meta = item.workload.metadata is not None
        # Only mounts that are not read-only get files laid out; a read-only one's data set
        # is read where it is, and nothing is written there (agent.dataset).
        self._data_dirs = (
            metadata.tree_roots(item, config.path)
            if self._meta
            else agent_data_dirs(item, config.agent_id, config.path)
        )
        self._before: dict[str, MountFacts] = {}
        self._fio: FioProcess | None = None
        self._fill: FillInfo | None = None
        self._sampler: CounterSampler | None = None
        self._sampling = False
        self._released = 0.0

    def prepare(self) -> None:
        item = self.item
        self._before = {t: self._mounts.facts(t) for t in item.targets}
        fio = self._fio = FioProcess(
            item.workload,
            data_dirs=self._data_dirs,
            work_dir=self.work_dir,
            fio_binary=self._binary,
            clocksource=self._clock,
            read_files=read_only_files(item, self._config.path, self.work_dir),
        )
        if self._meta:
            metadata.prepare(item.workload, self._data_dirs)
        else:
            self._fill = lay_out(fio, item.workload, fill=item.fill)
        if self._fill is not None:
            log.info("fill of %s: %s", item.item_id, "ran" if self._fill.ran else "marker valid")
        # Host counters each second while fio runs (what bound the run, core.analysis.ceilings)
        self._sampler = CounterSampler([self._before[t].mount_point for t in item.targets])
        self._sampler.start()
        self._sampling = True
        # fio starts up and waits at its gate before the agent says ready, so the start
        # instant only has to leave time for every agent to hear it (core.runs.protocol).
        fio.start()
        t_started = time.perf_counter()
        if not fio.wait_parked(PARK_TIMEOUT_S):
            log.warning("fio of %s not at its gate yet; reporting ready", item.item_id)
        log.info(
            "item %s: fio at its gate %.0f ms",
            item.item_id,
            (time.perf_counter() - t_started) * 1000,
        )

    def start(self) -> LiveRelay | None:
        fio = self._started()
        self._released = fio.release()
        if not self._config.live:
            return None
        # fio's counters start when the ramp ends (core.engines.fio_live).
        workload = self.item.workload
        measured_from = int(self._released) + 1000 * workload.ramp_time
        # A data job's I/Os are all one size (its bs); a metadata job's are no blocks.
        io_size = workload.bs_bytes if workload.metadata is None else None
        return LiveRelay(fio.output, measured_from_ms=measured_from, io_size=io_size)

    def poll(self) -> int | None:
        return self._started().poll()

    def stop(self) -> None:
        if self._fio is not None:
            self._fio.stop()  # nothing when it has ended; SIGTERM, then SIGKILL otherwise
        if self._sampling and self._sampler is not None:
            self._sampling = False  # once: each stop takes a last reading
            self._sampler.stop()

    def collect(self, scheduled_ms: int) -> Measured:
        fio, item = self._started(), self.item
        outcome = fio.collect()
        self._check(outcome)
        if self._meta:
            metadata.finish(item.workload, self._data_dirs)
        assert outcome.doc is not None, "checked"
        timeline = with_total_latency(
            timeline_from_logs(
                outcome.iops_logs,
                outcome.bw_logs,
                outcome.hist_logs,
                final=final_output(outcome.doc),
            ),
            StatusOutput(outcome.notes, outcome.doc, outcome.status),
        )
        result = build_result(
            item,
            fio_json=outcome.doc,
            timeline=timeline,
            agent_id=self._config.agent_id,
            host=self._host,
            scheduled_ms=scheduled_ms,
            released_ms=self._released,
            fill=self._fill,
            mounts=[self._mounts.facts(t) for t in item.targets],
        )
        sampler = self._sampler
        assert sampler is not None, "started in prepare"
        summary = sampler.summary(result.started_at_ms, result.ended_at_ms, outcome.doc)
        artifacts: dict[ArtifactName, bytes] = {
            "raw": pack_json(outcome.doc),
            "logs": fio.logs_archive(),
        }
        if timeline is not None:
            artifacts["timeline"] = pack_timeline(timeline)
        counters = sampler.artifact()
        if counters is not None:
            artifacts["counters"] = counters
        return Measured(result.model_copy(update={"counters": summary}), artifacts)

    def _started(self) -> FioProcess:
        assert self._fio is not None, "prepare makes the fio process"
        return self._fio

    def _check(self, outcome: FioOutcome) -> None:
        """Raises ItemFailed unless the mounts are the ones measured and fio's output is a
        measurement (core.engines.fio_check)."""
        item = self.item
        moved = mount_changes(item.targets, self._config.mounts, self._mounts, self._before)
        if moved:
            raise ItemFailed(moved)
        said = fio_messages(outcome.notes, outcome.stderr)
        if outcome.doc is None:
            err = " | ".join(said) or outcome.stderr.strip()[-1500:] or "no output"
            raise ItemFailed(
                f"fio exited {outcome.returncode}: {err}", permanent=permanent_failure(said)
            )
        problems = measurement_problems(outcome.doc, item.workload, mounts=len(item.targets))
        if outcome.returncode != 0:
            problems.insert(0, f"fio exited {outcome.returncode}")
        if problems:
            # fio's per-job error is an errno: a full or read-only target fails for good.
            raise ItemFailed(
                rejection(problems, said), permanent=permanent_failure([*problems, *said])
            )
