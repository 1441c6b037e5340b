"""What the CLI reads of the local stack without starting anything (and without the
emulators' SDKs, which a CLI-only install lacks): where its state is, the running stack's
API and targets, and the API port it had, which the next ``local up`` keeps."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_HOST_PORT = 7071  # the Azure Functions host's local port: a familiar bookmark
PORT_FILE = "api-port"  # kept across `down`, which removes stack.json


class StackError(RuntimeError):
    pass


def checkout() -> None:
    """The local stack runs from a source checkout: its emulators are npm packages pinned in
    package-lock.json, and the API's packages must be installed (``make install``)."""
    if not (ROOT / "package.json").exists():
        raise StackError(
            "the local stack runs from a source checkout (its emulators are npm packages "
            "pinned in package-lock.json): clone the repository and run `make demo` there"
        )


def state_dir() -> Path:
    return Path(os.environ.get("BENCH_LOCAL_DIR", ROOT / ".local"))


@dataclass(frozen=True)
class Running:
    """The stack a state file describes: its API and its targets (alias -> directory)."""

    api_url: str
    targets: dict[str, str]


def running(directory: Path | None = None) -> Running | None:
    path = (directory or state_dir()) / "stack.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return Running(f"http://127.0.0.1:{int(data['api_port'])}", dict(data.get("targets") or {}))


def remembered_port(directory: Path) -> int | None:
    try:
        return int((directory / PORT_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def remember_port(directory: Path, port: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / PORT_FILE).write_text(f"{port}\n")
