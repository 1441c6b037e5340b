"""The fio side of the agent's loop (agent.worker): lay out (or make the metadata tree),
start fio held at its gate, report ready, release at the step's instant, check and store.

Whatever this raises, the worker reports as a failed attempt (agent.failures); fio and the
counter sampler are stopped on every way out.
"""

from __future__ import annotations

import logging
import shutil
import time
from typing import TYPE_CHECKING

from agent import metadata
from agent.cleanup import data_dirs as agent_data_dirs
from agent.counters import CounterSampler
from agent.dataset import read_only_files
from agent.fio_runner import FioProcess, safe_name
from agent.layout import ItemFailed, lay_out
from agent.lease import Lease, sleep_until
from agent.live import LiveRelay
from agent.mounts import mount_changes
from core.artifacts import pack_json, pack_timeline
from core.engines.fio_check import (
    fio_messages,
    measurement_problems,
    permanent_failure,
    rejection,
)
from core.engines.fio_logs import final_output, timeline_from_logs
from core.engines.fio_status import StatusOutput, with_total_latency
from core.engines.results import build_result
from core.models import ArtifactName, WorkItem

if TYPE_CHECKING:
    from agent.worker import Worker

log = logging.getLogger(__name__)
PARK_TIMEOUT_S = 5.0  # fio's start-up before ready; a slower one starts late (its skew shows)


def run_fio(worker: Worker, item: WorkItem, lease: Lease, t_claimed: float) -> str:
    agent = worker.config.agent_id
    lease.start(heartbeats=True)
    work_dir = worker.work_root / safe_name(item.item_id)
    shutil.rmtree(work_dir, ignore_errors=True)
    # Only mounts that are not read-only get files laid out; a read-only one's data set
    # is read where it is, and nothing is written there (agent.dataset).
    data_dirs = agent_data_dirs(item, agent, worker.config.path)
    before = {t: worker.mounts.facts(t) for t in item.targets}
    meta = item.workload.metadata is not None
    if meta:
        data_dirs = metadata.tree_roots(item, worker.config.path)
    try:
        read_files = read_only_files(item, worker.config.path, work_dir)
        fio = FioProcess(
            item.workload,
            data_dirs=data_dirs,
            work_dir=work_dir,
            fio_binary=worker.fio_binary,
            read_files=read_files,
        )
        if meta:
            metadata.prepare(item.workload, data_dirs)
            fill = None
        else:
            fill = lay_out(fio, item.workload, fill=item.fill)
    except ItemFailed as e:
        return worker._failed(item, lease, str(e), permanent=e.permanent)
    if fill is not None:
        log.info("fill of %s: %s", item.item_id, "ran" if fill.ran else "marker valid")

    # Host counters each second while fio runs (what bound the run, core.analysis.ceilings)
    sampler = CounterSampler([before[t].mount_point for t in item.targets]).start()
    try:
        # fio starts up and waits at its gate before the agent says ready, so the start
        # instant only has to leave time for every agent to hear it (core.runs.protocol).
        fio.start()
        t_laid = time.perf_counter()
        if not fio.wait_parked(PARK_TIMEOUT_S):
            log.warning("fio of %s not at its gate yet; reporting ready", item.item_id)
        t_parked = time.perf_counter()
        scheduled = worker._await_start(item, lease)
        log.info(
            "item %s: checks and layout %.0f ms, fio at its gate %.0f ms, barrier %.0f ms",
            item.item_id,
            (t_laid - t_claimed) * 1000,
            (t_parked - t_laid) * 1000,
            (time.perf_counter() - t_parked) * 1000,
        )
        if isinstance(scheduled, str):
            return scheduled
        sleep_until(scheduled / 1000)
        worker.trace.stage("fio")
        released = fio.release()
        if worker.config.live:
            # fio's counters start when the ramp ends (core.engines.fio_live).
            measured_from = int(released) + 1000 * item.workload.ramp_time
            lease.live = LiveRelay(fio.output, measured_from_ms=measured_from)
        stop = worker._wait_for(fio, lease, item)
        if stop:
            return stop
        outcome = fio.collect()
    finally:
        fio.stop()  # nothing when it has ended; stopped (SIGTERM, then SIGKILL) otherwise
        sampler.stop()
    moved = mount_changes(item.targets, worker.config.mounts, worker.mounts, before)
    if moved:
        return worker._failed(item, lease, moved)
    said = fio_messages(outcome.notes, outcome.stderr)
    if outcome.doc is None:
        err = " | ".join(said) or outcome.stderr.strip()[-1500:] or "no output"
        return worker._failed(
            item,
            lease,
            f"fio exited {outcome.returncode}: {err}",
            permanent=permanent_failure(said),
        )
    problems = measurement_problems(outcome.doc, item.workload, mounts=len(item.targets))
    if outcome.returncode != 0:
        problems.insert(0, f"fio exited {outcome.returncode}")
    if problems:
        # fio's per-job error is an errno: a full or read-only target fails for good.
        return worker._failed(
            item,
            lease,
            rejection(problems, said),
            permanent=permanent_failure([*problems, *said]),
        )
    if meta:
        try:
            metadata.finish(item.workload, data_dirs)
        except ItemFailed as e:
            return worker._failed(item, lease, str(e), permanent=e.permanent)
    timeline = with_total_latency(
        timeline_from_logs(
            outcome.iops_logs,
            outcome.bw_logs,
            outcome.hist_logs,
            final=final_output(outcome.doc),
        ),
        StatusOutput(outcome.notes, outcome.doc, outcome.status),
    )
    artifacts: dict[ArtifactName, bytes] = {
        "raw": pack_json(outcome.doc),
        "logs": fio.logs_archive(),
    }
    if timeline is not None:
        artifacts["timeline"] = pack_timeline(timeline)
    counters = sampler.artifact()
    if counters is not None:
        artifacts["counters"] = counters
    result = build_result(
        item,
        fio_json=outcome.doc,
        timeline=timeline,
        agent_id=agent,
        host=worker.host,
        scheduled_ms=scheduled,
        released_ms=released,
        fill=fill,
        mounts=[worker.mounts.facts(t) for t in item.targets],
    )
    summary = sampler.summary(result.started_at_ms, result.ended_at_ms, outcome.doc)
    uploaded = worker._upload(item, artifacts)
    result = result.model_copy(update={"artifacts": uploaded, "counters": summary})
    return worker._store(result, lease, work_dir)
