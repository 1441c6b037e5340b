"""A process is gone only once its last thread is: what `benchctl local down` and the tests'
stop wait for (an agent's work-directory lock goes with its last thread)."""

from __future__ import annotations

import platform
import subprocess
import sys
import time

from benchctl.local_procs import Proc

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
