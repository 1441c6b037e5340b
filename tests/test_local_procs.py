"""A process is gone only once its last thread is: what `benchctl local down` and the tests'
stop wait for (an agent's work-directory lock goes with its last thread)."""

from __future__ import annotations

import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchctl import local_procs
from benchctl.local_procs import Proc, listens, port_open, wait_listening
from benchctl.local_state import StackError, free_ports

# The main thread leaves by the exit system call while another thread sleeps 1.5 s: the
# main thread is a zombie, the process is not gone (x86_64: SYS_exit is 60).
LEADER_EXITS_FIRST = (
    "import ctypes, threading, time\n"
    "threading.Thread(target=time.sleep, args=(1.5,)).start()\n"
    "ctypes.CDLL(None).syscall(60, 0)\n"
)


def test_a_process_whose_main_thread_exited_is_alive_until_its_last_thread_is_gone() -> None:
    assert platform.machine() == "x86_64"
    p = subprocess.Popen([sys.executable, "-c", LEADER_EXITS_FIRST])
    proc = Proc(name="leader-exits-first", pid=p.pid, log="")
    try:
        time.sleep(0.5)
        state = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()[0]
        assert state == "Z"  # the main thread is a zombie ...
        assert proc.alive()  # ... and the process still runs its other thread
        assert p.wait(5) == 0
        assert not proc.alive()
    finally:
        p.kill()
        p.wait()


# A server that fails to bind its port dies a moment later, as Azurite does on EADDRINUSE.
BINDS_THEN_DIES = (
    "import socket, sys, time\n"
    "s = socket.socket()\n"
    "try:\n"
    "    s.bind(('127.0.0.1', int(sys.argv[1])))\n"
    "except OSError:\n"
    "    time.sleep(1.0)\n"
    "    sys.exit(1)\n"
    "s.listen()\n"
    "time.sleep(30)\n"
)


def test_a_server_is_ready_when_it_listens_itself_not_when_another_holds_its_port() -> None:
    first, second = free_ports(2)
    assert first != second
    taken = socket.socket()
    taken.bind(("127.0.0.1", first))
    taken.listen()  # another stack's server, on the port this one was given
    loser = subprocess.Popen([sys.executable, "-c", BINDS_THEN_DIES, str(first)])
    winner = subprocess.Popen([sys.executable, "-c", BINDS_THEN_DIES, str(second)])
    try:
        assert port_open(first)  # what the old check looked at: it answers ...
        started = time.monotonic()
        with pytest.raises(StackError, match="loser exited"):
            wait_listening("loser", Proc(name="loser", pid=loser.pid, log="", port=first))
        assert time.monotonic() - started < 5
        wait_listening("winner", Proc(name="winner", pid=winner.pid, log="", port=second), 10)
        assert listens(Proc(name="winner", pid=winner.pid, log="", port=second))
        assert not listens(Proc(name="winner", pid=winner.pid, log="", port=first))
    finally:
        taken.close()
        for p in (loser, winner):
            p.kill()
            p.wait()


def test_a_machine_without_ipv6_has_no_tcp6_table_and_a_listener_is_still_found(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (port,) = free_ports(1)
    server = subprocess.Popen([sys.executable, "-c", BINDS_THEN_DIES, str(port)])
    tables = (Path("/proc/net/tcp"), tmp_path / "tcp6")  # what ipv6.disable=1 leaves
    monkeypatch.setattr(local_procs, "TCP_TABLES", tables)
    try:
        wait_listening("server", Proc(name="server", pid=server.pid, log="", port=port), 10)
    finally:
        server.kill()
        server.wait()
