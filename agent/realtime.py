"""The wake-up at a step's start instant, ahead of every ordinary thread where permitted.

An agent sleeps until the step's common instant and then writes its fio's start FIFO
(agent.fio_item). How late that write lands is the part of the start skew that is the
agent's own: with 32 agents on one 2-core machine (the local stack), 32 processes woke at
the same instant behind the API's and the other agents' work, and the last wrote its FIFO
20-41 ms after the instant (issue 29.3, 2026-11-27). For those last moments, the sleep and
the one write, the calling thread runs under SCHED_FIFO at the lowest real-time priority:
the kernel wakes it without timer slack and runs it before any ordinary (SCHED_OTHER)
thread, and it gives the CPU back by itself within the write. It never spins, so a thread
left real-time by mistake would still sleep; it is lowered again on every way out.

Where it is not permitted (an agent run without root or CAP_SYS_NICE, a cgroup with no
real-time budget, Windows) nothing changes and nothing is said but a debug line: the
sleep then ends as it always did. On a client VM of its own the agent competes with little
else at that instant, so the gain there is small; the priority matters where many agents
(or other work) share few cores.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

log = logging.getLogger(__name__)
# The lowest real-time priority: above every ordinary thread, below the kernel's own
# real-time threads (migration, watchdogs at 99) and anything an operator raised.
PRIORITY = 1


@contextlib.contextmanager
def realtime() -> Iterator[bool]:
    """Run the calling thread (only it: on Linux, pid 0 is the calling thread) under
    SCHED_FIFO inside the block; yields whether it does. Its policy and priority before
    are restored on the way out."""
    before = _raise()
    try:
        yield before is not None
    finally:
        if before is not None:
            policy, priority = before
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, policy, os.sched_param(priority))


def _raise() -> tuple[int, int] | None:
    """The thread's policy and priority before, once raised; None where not permitted."""
    if not hasattr(os, "sched_setscheduler"):  # Windows, macOS
        return None
    try:
        before = os.sched_getscheduler(0), os.sched_getparam(0).sched_priority
        if before[0] in (os.SCHED_FIFO, os.SCHED_RR):
            return None  # real-time already (an operator's choice): left as it is
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PRIORITY))
    except OSError as e:  # EPERM: no CAP_SYS_NICE, or no real-time budget in this cgroup
        log.debug("the start instant's wake-up stays an ordinary thread's: %s", e)
        return None
    return before
