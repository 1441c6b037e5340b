"""The DiskSpd side of the agent's loop (agent.worker): DiskSpd is not parked on a start
FIFO as fio is, so its files are laid out before ready and the process starts at the step's
instant."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from agent.diskspd_runner import DiskSpdProcess
from agent.fio_runner import safe_name
from agent.hostfacts import mount_facts
from agent.lease import Lease, sleep_until
from core.artifacts import pack_json, pack_timeline
from core.engines.results import build_diskspd_result
from core.models import ArtifactName, WorkItem

if TYPE_CHECKING:
    from agent.worker import Worker


def run_diskspd(worker: Worker, item: WorkItem, lease: Lease) -> str:
    """One DiskSpd item: lay out, wait at the barrier, run at the instant, store."""
    agent = worker.config.agent_id
    binary = worker.config.diskspd_binary
    if shutil.which(binary) is None:
        return worker._failed(
            item, lease, f"agent {agent} cannot run DiskSpd ({binary})", permanent=True
        )
    lease.start(heartbeats=True)
    work_dir = worker.work_root / safe_name(item.item_id)
    shutil.rmtree(work_dir, ignore_errors=True)
    dirs = [Path(worker.config.path(t)) / "benchsvc" / safe_name(agent) for t in item.targets]
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    proc = DiskSpdProcess(
        item.workload,
        targets=[str(d) for d in dirs],
        work_dir=work_dir,
        files_per_target=item.files_per_target,
        cooldown_s=item.cooldown_s,
        binary=binary,
    )
    # Lay the files out before reporting ready, as fio's create_only pass does: the
    # measured run then opens them as they are, and creates nothing after the start.
    rc, err = proc.layout()  # the "layout" stage the worker began at the claim
    if rc != 0:
        return worker._failed(item, lease, f"DiskSpd file layout exited {rc}: {err[-1500:]}")
    scheduled = worker._await_start(item, lease)
    if isinstance(scheduled, str):
        return scheduled
    sleep_until(scheduled / 1000)
    worker.trace.stage("diskspd")
    proc.start()
    stop = worker._wait_for(proc, lease, item)
    if stop:
        return stop
    out = proc.collect()
    try:
        result, timeline = build_diskspd_result(
            item,
            xml=out.xml,
            launched_s=out.launched_s,
            written_s=out.written_s,
            agent_id=agent,
            host=worker.host,
            mounts=[mount_facts(t, worker.config.path(t)) for t in item.targets],
            scheduled_ms=scheduled,
        )
    except ValueError as e:
        return worker._failed(
            item, lease, f"DiskSpd exited {out.returncode}: {e}; {out.stderr.strip()[-1000:]}"
        )
    artifacts: dict[ArtifactName, bytes] = {"raw": pack_json({"diskspd_xml": out.xml})}
    if timeline is not None:
        artifacts["timeline"] = pack_timeline(timeline)
    result = result.model_copy(update={"artifacts": worker._upload(item, artifacts)})
    return worker._store(result, lease, work_dir)
