"""The local stack's processes: what was started (its pid, log and port), whether it is
still alive, waiting for it to answer, and stopping it with its process group."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchctl.local_state import StackError

TCP_LISTEN = "0A"  # the state column of /proc/net/tcp (include/net/tcp_states.h)
TCP_TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))


@dataclass
class Proc:
    name: str
    pid: int
    log: str
    port: int | None = None
    pool: str | None = None  # an agent's pool

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        # A zombie still answers kill(0): look at its state. The main thread of a process
        # killed while other threads ran can be a zombie before they are gone, and its open
        # files (an agent's work-directory lock) go with the last thread: alive until then.
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] != "Z":
                return True
            return len(os.listdir(f"/proc/{self.pid}/task")) > 1
        except OSError:
            return False


def wait_ready(what: str, check: Callable[[], bool], proc: Proc, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise StackError(f"{what} exited; see {proc.log}:\n{tail(proc.log)}")
        try:
            if check():
                return
        except (OSError, httpx.HTTPError):
            pass
        time.sleep(0.2)
    raise StackError(f"{what} not ready after {timeout:.0f} s; see {proc.log}:\n{tail(proc.log)}")


def wait_api(p: Proc) -> None:  # an instance, or the balancer in front of them
    url = f"http://127.0.0.1:{p.port}/api/health"
    wait_ready(p.name, lambda: httpx.get(url, timeout=2).status_code == 200, p)


def tail(path: str, lines: int = 30) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def listens(p: Proc) -> bool:
    """Whether ``p`` itself listens on its port. That the port answers is not enough: when
    another process holds it (a server of another stack that took the port first), this one
    dies of EADDRINUSE, and a check that only connects could find the other one ready."""
    if p.port is None:
        raise StackError(f"{p.name} was started without a port to listen on")
    wanted = f":{p.port:04X}"
    inodes = set()
    for table in TCP_TABLES:
        if not table.exists():  # no tcp6 where IPv6 is off (ipv6.disable=1)
            continue
        for row in table.read_text().splitlines()[1:]:
            fields = row.split()
            if fields[1].endswith(wanted) and fields[3] == TCP_LISTEN:
                inodes.add(f"socket:[{fields[9]}]")
    fds = Path(f"/proc/{p.pid}/fd")
    try:
        return any(os.readlink(fd) in inodes for fd in fds.iterdir())
    except OSError:  # gone, or an fd closed while looking
        return False


def wait_listening(what: str, p: Proc, timeout: float = 60.0) -> None:
    wait_ready(what, lambda: listens(p), p, timeout)


def stop_proc(p: Proc, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
    if not p.alive():
        return
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while p.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    if p.alive():
        os.killpg(p.pid, signal.SIGKILL)
