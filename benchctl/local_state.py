"""What the CLI reads of the local stack without starting anything (and without the
emulators' SDKs, which a CLI-only install lacks): where its state is, the running stack's
API and targets, and the API port it had, which the next ``local up`` keeps."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_HOST_PORT = 7071  # the Azure Functions host's local port: a familiar bookmark
DATA_DIRS = ("azurite", "cosmosdb")  # the emulators' data in the stack's directory
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


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int, besides: Collection[int] = ()) -> list[int]:
    """``count`` distinct free ports, none of ``besides``. Each socket stays bound until all
    are picked: one closed before the next bind can be handed out again (a stack's queue and
    blob services were once both given 50551, and the blob service died of EADDRINUSE)."""
    ports: list[int] = []
    with contextlib.ExitStack() as held:
        while len(ports) < count:
            s = held.enter_context(socket.socket())
            s.bind(("127.0.0.1", 0))
            if (port := int(s.getsockname()[1])) not in besides:
                ports.append(port)
    return ports


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def listen_on(port: int) -> socket.socket:
    """A listening socket on ``port`` (0: any free one), for a server started on it
    (``python -m benchctl.local_api --fd N``): the bind is the check, so no other server
    can take the port between the two. StackError when the port is taken."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: past TIME_WAIT
    try:
        s.bind(("127.0.0.1", port))
        s.listen(2048)  # uvicorn's backlog
    except OSError as e:
        s.close()
        raise StackError(f"port {port} is already in use: {e}") from e
    return s


def api_port_for(directory: Path) -> tuple[int, str | None]:
    """The port the stack's API had (bookmarks of the UI keep working), 7071 (the Functions
    host's) the first time; another free port only when that one is taken, saying so."""
    had = remembered_port(directory)
    wanted = had or FUNCTIONS_HOST_PORT
    if port_free(wanted):
        return wanted, None
    if had is not None and had != FUNCTIONS_HOST_PORT and port_free(FUNCTIONS_HOST_PORT):
        return FUNCTIONS_HOST_PORT, f"port {had}, the API's last time, is in use: took 7071"
    port = free_port()
    return port, f"port {wanted} is in use: the API is on {port} this time"


def pool_specs(
    agents: int, max_agents: int | None, idle_s: float, price: float | None
) -> list[str]:
    """The stack's one pool, as BENCH_POOLS names it."""
    # The pool declares its size, so a run is judged on it even before every agent has
    # registered (core.fleet.admission).
    pools = [f"default:size={agents}"] if agents > 0 else ["default"]
    if max_agents is not None:
        # An elastic pool (core.fleet.scaling): the API's timer starts agents up to
        # max_agents when runs need them and stops them down to `agents` when idle.
        if max_agents < max(agents, 1):
            raise StackError(f"--max-agents {max_agents} is below --agents {agents}")
        pools = [f"default:max={max_agents}:min={agents}:idle={idle_s:g}"]
    if price is not None:  # the hourly price of a client VM: usage has a cost
        pools = [f"{pools[0]}:price={price:g}"]
    return pools


def remove_data(directory: Path) -> None:
    """Forget every run, result, schedule, series and queued message kept in ``directory``."""
    for name in DATA_DIRS:
        shutil.rmtree(directory / name, ignore_errors=True)
