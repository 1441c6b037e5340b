"""Agent configuration: its pool, its mount aliases and the endpoints it talks to.

Read from a JSON file (``--config``), overridden by command-line flags. Mount paths are
checked once here: only these directories are ever written by fio.
"""

from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.diskspd import target_files
from core.fiojob import check_path
from core.models import POOL_PATTERN, check_alias


@dataclass(frozen=True)
class AgentConfig:
    api_url: str
    queue_uri: str
    pool: str = "default"
    mounts: dict[str, str] = field(default_factory=dict)
    agent_id: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    local_emulators: bool = False
    visibility_timeout: int = 60  # seconds; the lease is renewed at half of it
    idle_min_s: float = 0.5
    idle_max_s: float = 15.0
    retry_delay_s: int = 5  # how soon a failed item becomes visible again
    work_dir: str = ""  # where job files and fio logs go (never on a mount)
    api_scope: str | None = None  # Entra ID scope of the API; None = no token (local)
    # A per-agent key (BENCH_API_KEYS entry NAME:agent:KEY, with agent_id = NAME), sent as
    # X-Api-Key; also from $BENCH_AGENT_API_KEY. Kept out of repr, so out of logs.
    api_key: str | None = field(default=None, repr=False)
    managed_identity_client_id: str | None = None
    imds: bool = False  # ask Azure's instance metadata for the VM size
    diskspd_binary: str = "diskspd.exe"  # Windows agents run engine "diskspd" items

    def __post_init__(self) -> None:
        if not re.match(POOL_PATTERN, self.pool):
            raise ValueError(f"pool {self.pool!r} is not a valid pool name")
        for alias, path in self.mounts.items():
            check_alias(alias)  # ValueError names the alias and the rule
            # Windows agents mount shares as drive letters or UNC paths.
            target_files([path]) if os.name == "nt" else check_path(path)
            if not Path(path).is_dir():
                raise ValueError(f"mount {alias}={path} is not a directory")
        if self.visibility_timeout < 4:
            raise ValueError("visibility_timeout must be at least 4 seconds")

    @classmethod
    def load(cls, path: str | None, overrides: dict[str, Any]) -> AgentConfig:
        data: dict[str, Any] = json.loads(Path(path).read_text()) if path else {}
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**data)
