"""The agent's registration and heartbeat to the registry (POST /api/agent/register).

Sent at start, then every ``heartbeat_s`` seconds from a thread of its own, idle or busy
(one small call per period: 30 s by default), and once more as ``stopped`` when the agent
exits cleanly. It says what the agent can serve: its mounts as /proc/self/mountinfo shows
them and whether each is usable now, the engines it finds, the host's facts. A beat that
fails is logged and not retried: the next one follows a period later, and the service
counts an agent gone only after three silent periods.
"""

from __future__ import annotations

import logging
import shutil
import threading
import uuid
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from agent.api_client import ApiClient
from agent.config import AgentConfig
from agent.hostfacts import mount_facts
from agent.mounts import mount_problem, read_mountinfo
from core.errors import BenchError
from core.models import HostFacts
from core.models.agents import AgentMount, Registration

log = logging.getLogger(__name__)
RETRY_S = 2.0


def agent_version() -> str:
    try:
        return version("benchsvc")
    except PackageNotFoundError:
        return "0+unknown"


def engines(config: AgentConfig) -> list[str]:
    """The engines this host can start: their binaries are found."""
    found = []
    if shutil.which(config.fio_binary):
        found.append("fio")
    if shutil.which(config.diskspd_binary):
        found.append("diskspd")
    return found


def mounts(config: AgentConfig) -> list[AgentMount]:
    info = read_mountinfo()
    out = []
    for alias, spec in config.mounts.items():
        problem = mount_problem(alias, spec, info)
        facts = mount_facts(alias, spec.path, info) if info is not None else None
        out.append(
            AgentMount(
                alias=alias,
                path=spec.path,
                fstype=facts.fstype if facts else "unknown",
                source=facts.source if facts else "",
                options=(facts.options if facts else "")[:4096],
                usable=problem is None,
                problem=problem[:1000] if problem else None,
            )
        )
    return out


class Beacon:
    def __init__(self, config: AgentConfig, api: ApiClient, host: HostFacts) -> None:
        self.config = config
        self.api = api
        self.host = host
        self.session = uuid.uuid4().hex
        self.item_id: str | None = None  # the item the worker holds now
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def registration(self, state: str) -> dict[str, Any]:
        c, h = self.config, self.host
        # While it holds an item an agent that is not stopping is busy with it.
        busy = state != "stopped" and self.item_id is not None
        reg = Registration(
            agent_id=c.agent_id,
            pool=c.pool,
            session=self.session,
            state="busy" if busy else state,
            item_id=self.item_id if busy else None,
            mounts=mounts(c),
            engines=engines(c),
            os=h.os,
            kernel=h.kernel,
            hostname=h.hostname,
            version=agent_version(),
            vm_size=h.vm_size,
            region=h.region,
            cpu_count=h.cpu_count,
            heartbeat_s=c.heartbeat_s,
        )
        return reg.model_dump(mode="json")

    def beat(self, state: str = "idle") -> bool:
        try:
            self.api.register(self.registration(state))
            return True
        except BenchError as e:
            log.warning(
                "registration with the service failed (next in %.0f s): %s",
                self.config.heartbeat_s,
                e,
            )
            return False

    def start(self) -> Beacon:
        first = self.beat()
        self._thread = threading.Thread(
            target=self._loop, args=(first,), name="beacon", daemon=True
        )
        self._thread.start()
        return self

    def _loop(self, ok: bool) -> None:
        # A beat that failed (the API not up yet, a blip) is tried again within a second
        # or two, not a whole period later: an agent unknown to the registry gets no runs.
        wait = self.config.heartbeat_s if ok else min(RETRY_S, self.config.heartbeat_s)
        while not self._stop.wait(wait):
            ok = self.beat()
            wait = self.config.heartbeat_s if ok else min(RETRY_S, self.config.heartbeat_s)

    def stop(self) -> None:
        """Stop beating and tell the service this agent is released."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.item_id = None
        self.beat("stopped")
