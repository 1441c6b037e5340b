"""DiskSpd behind the agent's engine interface (agent.engine). DiskSpd is not parked on a
start FIFO as fio is, so its files are laid out before ready and the process starts at the
step's instant."""

from __future__ import annotations

from pathlib import Path

from agent.config import AgentConfig
from agent.diskspd_runner import DiskSpdProcess
from agent.engine import Measured
from agent.fio_runner import safe_name
from agent.hostfacts import mount_facts
from agent.layout import ItemFailed
from core.artifacts import pack_json, pack_timeline
from core.engines.results import build_diskspd_result
from core.models import ArtifactName, HostFacts, WorkItem


class DiskSpdEngine:
    stage = "diskspd"

    def __init__(
        self, item: WorkItem, work_dir: Path, *, config: AgentConfig, host: HostFacts
    ) -> None:
        self.item = item
        self.work_dir = work_dir
        self._config = config
        self._host = host
        agent = config.agent_id
        self._dirs = [Path(config.path(t)) / "benchsvc" / safe_name(agent) for t in item.targets]
        self._proc = DiskSpdProcess(
            item.workload,
            targets=[str(d) for d in self._dirs],
            work_dir=work_dir,
            files_per_target=item.files_per_target,
            cooldown_s=item.cooldown_s,
            binary=config.diskspd_binary,
        )

    def prepare(self) -> None:
        for d in self._dirs:
            d.mkdir(parents=True, exist_ok=True)
        # Lay the files out before reporting ready, as fio's create_only pass does: the
        # measured run then opens them as they are, and creates nothing after the start.
        rc, err = self._proc.layout()
        if rc != 0:
            raise ItemFailed(f"DiskSpd file layout exited {rc}: {err[-1500:]}")

    def start(self) -> None:
        self._proc.start()

    def poll(self) -> int | None:
        return self._proc.poll()

    def stop(self) -> None:
        self._proc.stop()

    def collect(self, scheduled_ms: int) -> Measured:
        out = self._proc.collect()
        item, config = self.item, self._config
        try:
            result, timeline = build_diskspd_result(
                item,
                xml=out.xml,
                launched_s=out.launched_s,
                written_s=out.written_s,
                agent_id=config.agent_id,
                host=self._host,
                mounts=[mount_facts(t, config.path(t)) for t in item.targets],
                scheduled_ms=scheduled_ms,
            )
        except ValueError as e:
            raise ItemFailed(
                f"DiskSpd exited {out.returncode}: {e}; {out.stderr.strip()[-1000:]}"
            ) from e
        artifacts: dict[ArtifactName, bytes] = {"raw": pack_json({"diskspd_xml": out.xml})}
        if timeline is not None:
            artifacts["timeline"] = pack_timeline(timeline)
        return Measured(result, artifacts)
