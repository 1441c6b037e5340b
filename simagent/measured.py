"""A simulated client's result and artifacts, built by the agent's own code from the fio
outputs of its declared rate (simagent.figures): the checks fio's output must pass, the
timeline from the logs, the result and the packed artifacts, as agent/fio_item.py does.

Clients of one step that started on the same instant at the same rate produce the same
outputs: they are built once per process (``Measurements``) and only the result's ids differ.
"""

from __future__ import annotations

import io
import tarfile
import threading
from dataclasses import dataclass

from core.artifacts import pack_json, pack_timeline
from core.engines.fio_check import measurement_problems
from core.engines.fio_logs import final_output, timeline_from_logs
from core.engines.fio_status import StatusOutput, with_total_latency
from core.engines.results import build_result
from core.models import ArtifactName, HostFacts, MountFacts, Result, WorkItem
from simagent.figures import DeclaredRate, FioOutputs, fio_outputs

SIM_FSTYPE = "simulated"


@dataclass(frozen=True)
class Measured:
    result: Result
    artifacts: dict[ArtifactName, bytes]


def sim_mounts(item: WorkItem) -> list[MountFacts]:
    return [
        MountFacts(
            alias=t,
            path=f"/simulated/{t}",
            mount_point=f"/simulated/{t}",
            fstype=SIM_FSTYPE,
            options="",
            source="simulated",
        )
        for t in item.targets
    ]


def logs_archive(out: FioOutputs) -> bytes:
    """The logs as the agent keeps them beside the result (a gzip'd tar of fio's files)."""
    buffer = io.BytesIO()
    files = {
        "bench_bw.1.log": out.bw_log,
        "bench_clat_hist.1.log": out.hist_log,
        "bench_iops.1.log": out.iops_log,
    }
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in sorted(files.items()):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def measure(
    item: WorkItem,
    rate: DeclaredRate,
    *,
    agent_id: str,
    host: HostFacts,
    scheduled_ms: int,
    started_ms: int,
) -> Measured:
    """The result of ``item`` measured at ``rate`` from ``started_ms`` (the client's start
    instant; its ramp, if any, is not logged, as fio does not log it)."""
    out = fio_outputs(rate, item.workload, started_ms + item.workload.ramp_time * 1000)
    problems = measurement_problems(out.doc, item.workload, mounts=len(item.targets))
    if problems:  # a bug of the simulator: the same check the agent makes of fio's output
        raise ValueError("; ".join(problems))
    timeline = with_total_latency(
        timeline_from_logs(
            [out.iops_log], [out.bw_log], [out.hist_log], final=final_output(out.doc)
        ),
        StatusOutput("", out.doc, []),
    )
    result = build_result(
        item,
        fio_json=out.doc,
        timeline=timeline,
        agent_id=agent_id,
        host=host,
        scheduled_ms=scheduled_ms,
        released_ms=float(started_ms),
        mounts=sim_mounts(item),
    )
    artifacts: dict[ArtifactName, bytes] = {"raw": pack_json(out.doc), "logs": logs_archive(out)}
    if timeline is not None:
        artifacts["timeline"] = pack_timeline(timeline)
    return Measured(result, artifacts)


class Measurements:
    """Built once per (workload, rate, instants, targets); a client gets a copy with its
    own ids. Thread-safe: the fleet's calls run on a pool of threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[tuple[str, int, int, int, int, tuple[str, ...]], Measured] = {}

    def of(
        self,
        item: WorkItem,
        rate: DeclaredRate,
        *,
        agent_id: str,
        host: HostFacts,
        scheduled_ms: int,
        started_ms: int,
    ) -> Measured:
        key = (
            item.workload.model_dump_json(),
            rate.iops,
            rate.latency_ns,
            scheduled_ms,
            started_ms,
            tuple(item.targets),
        )
        with self._lock:
            made = self._made.get(key)
            if made is None:
                made = measure(
                    item,
                    rate,
                    agent_id=agent_id,
                    host=host,
                    scheduled_ms=scheduled_ms,
                    started_ms=started_ms,
                )
                self._made = {key: made}  # keep one: a step's clients share it
        ids = {
            "id": item.item_id,
            "run_id": item.run_id,
            "item_id": item.item_id,
            "step": item.step,
            "client": item.client,
            "agent_id": agent_id,
        }
        return Measured(made.result.model_copy(update=ids), made.artifacts)
