"""Agent configuration: its pool, its mount aliases and the endpoints it talks to.

Read from a JSON file (``--config``), overridden by command-line flags. Mount paths are
checked once here: only these directories are ever written by fio. Whether each one is
the filesystem it must be is checked at start and before every item (agent/mounts.py).
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic import ValidationError as PydanticError

from core.engines.diskspd_command import target_files
from core.engines.fio_job import check_path
from core.models import POOL_PATTERN, check_alias
from core.validation import field_errors

# mountinfo's fstype field: nfs, nfs4, cifs, ext4, xfs, tmpfs, fuse.blobfuse2, ...
FSTYPE_PATTERN = r"^[a-z0-9][a-z0-9._+-]{0,31}$"


class MountSpec(BaseModel):
    """One configured mount: where it is and, when declared, what it must be.

    Without ``fstype`` and ``source`` the directory is used as it is (no type check).
    With them, the agent runs items on it only while ``path`` is a mount point of that
    type (from that source), as /proc/self/mountinfo says.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1, max_length=1024)
    fstype: str | None = Field(None, pattern=FSTYPE_PATTERN)
    source: str | None = Field(None, min_length=1, max_length=1024)

    @property
    def declared(self) -> bool:
        return self.fstype is not None or self.source is not None

    @classmethod
    def parse(cls, alias: str, value: Any) -> MountSpec:
        """A plain path string (today's form) or ``{"path", "fstype", "source"}``."""
        try:
            if isinstance(value, MountSpec):
                return value
            if isinstance(value, str):
                return cls(path=value)
            return cls.model_validate(value)
        except PydanticError as e:
            errors = field_errors(e.errors(), prefix=f"mounts.{alias}.")
            raise ValueError(", ".join(f"{f.field}: {f.message}" for f in errors)) from None

    @classmethod
    def from_flag(cls, text: str) -> tuple[str, MountSpec]:
        """``ALIAS=PATH[,fstype=TYPE][,source=SOURCE]`` (the --mount flag)."""
        alias, sep, rest = text.partition("=")
        if not sep or not rest:
            raise ValueError(f"--mount {text!r}: expected ALIAS=PATH[,fstype=T][,source=S]")
        path, *options = rest.split(",")
        fields: dict[str, str] = {"path": path}
        for option in options:
            key, sep, value = option.partition("=")
            if not sep or key not in ("fstype", "source") or key in fields:
                raise ValueError(
                    f"--mount {text!r}: {option!r} is not fstype=TYPE or source=SOURCE"
                )
            fields[key] = value
        return alias, cls.parse(alias, fields)


@dataclass(frozen=True)
class AgentConfig:
    api_url: str
    queue_uri: str
    pool: str = "default"
    mounts: dict[str, MountSpec] = field(default_factory=dict)
    agent_id: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    local_emulators: bool = False
    visibility_timeout: int = 60  # seconds; the lease is renewed at half of it
    # An idle agent polls every 0.25 s: an item waits at most that long for it (a request
    # to first I/O within 1 s at 4 clients, issue 17.4) for 14,400 queue requests per
    # agent-hour (Azure Queue Storage bills them per 10,000). --idle-max 15 makes an idle
    # pool cheaper and its first item up to 15 s later.
    idle_min_s: float = 0.25
    idle_max_s: float = 0.25
    retry_delay_s: int = 5  # how soon a failed item becomes visible again
    work_dir: str = ""  # where job files and fio logs go (never on a mount)
    api_scope: str | None = None  # Entra ID scope of the API; None = no token (local)
    # A per-agent key (BENCH_API_KEYS entry NAME:agent:KEY, with agent_id = NAME), sent as
    # X-Api-Key; also from $BENCH_AGENT_API_KEY. Kept out of repr, so out of logs.
    api_key: str | None = field(default=None, repr=False)
    managed_identity_client_id: str | None = None
    imds: bool = False  # ask Azure's instance metadata for the VM size
    diskspd_binary: str = "diskspd.exe"  # Windows agents run engine "diskspd" items
    fio_binary: str = "fio"
    heartbeat_s: float = 30.0  # registry heartbeat (core.models.agents): one call a period
    # Relay fio's status output with each item heartbeat (agent.live): the live view. Off
    # only to measure what it costs (bench/live_cost.py).
    live: bool = True
    # Traces to Application Insights (Entra ID ingestion with this agent's managed identity);
    # else the OTEL_* / BENCH_TELEMETRY_DIR environment decides (adapters/telemetry.py).
    appinsights_connection_string: str | None = None

    def __post_init__(self) -> None:
        if not re.match(POOL_PATTERN, self.pool):
            raise ValueError(f"pool {self.pool!r} is not a valid pool name")
        for alias, spec in self.mounts.items():
            check_alias(alias)  # ValueError names the alias and the rule
            if not isinstance(spec, MountSpec):
                raise TypeError(f"mounts.{alias} must be a MountSpec")
            # Windows agents mount shares as drive letters or UNC paths.
            target_files([spec.path]) if os.name == "nt" else check_path(spec.path)
        if not 0.5 <= self.heartbeat_s <= 3600:
            raise ValueError("heartbeat_s must be between 0.5 and 3600 seconds")
        if self.visibility_timeout < 4:
            raise ValueError("visibility_timeout must be at least 4 seconds")

    def path(self, alias: str) -> str:
        return self.mounts[alias].path

    @classmethod
    def load(cls, path: str | None, overrides: dict[str, Any]) -> AgentConfig:
        data: dict[str, Any] = json.loads(Path(path).read_text()) if path else {}
        data.update({k: v for k, v in overrides.items() if v is not None})
        data["mounts"] = parse_mounts(data.get("mounts") or {})
        return cls(**data)


def parse_mounts(raw: Any) -> dict[str, MountSpec]:
    if not isinstance(raw, Mapping):
        raise ValueError("mounts must be an object of alias: path or {path, fstype, source}")
    return {str(alias): MountSpec.parse(str(alias), value) for alias, value in raw.items()}
