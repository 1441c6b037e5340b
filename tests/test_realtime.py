"""The wake-up at the start instant (agent.realtime): the worker sleeps to the instant and
releases fio on a real-time thread where the system permits it (the local stack and a
client VM's agent run as root), and only then; the thread is an ordinary one again after,
and a start that launches a process (DiskSpd) never runs real-time. No server, no fio: the
worker's own ``_measure`` with an engine that records the thread's policy at its start."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import cast

from adapters.queue import WorkQueues
from agent.api_client import ApiClient
from agent.config import AgentConfig, MountSpec
from agent.engine import Measured
from agent.lease import Lease
from agent.realtime import PRIORITY, realtime
from agent.worker import Worker
from core.models import WorkItem, Workload


def permitted() -> bool:
    """Whether this system lets a thread become real-time (asked on a thread of its own)."""
    seen: list[bool] = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(PRIORITY))
        except OSError:
            seen.append(False)
            return
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        seen.append(True)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return seen[0]


def test_realtime_raises_the_calling_thread_only_and_lowers_it_again() -> None:
    main_policy = os.sched_getscheduler(0)
    inside: list[tuple[bool, int]] = []
    others: list[int] = []

    def release() -> None:
        with realtime() as raised:
            inside.append((raised, os.sched_getscheduler(0)))
            others.append(os.sched_getscheduler(threading.main_thread().native_id or 0))
        inside.append((raised, os.sched_getscheduler(0)))

    t = threading.Thread(target=release)
    t.start()
    t.join()
    if permitted():
        assert inside == [(True, os.SCHED_FIFO), (True, os.SCHED_OTHER)]
    else:  # nothing changes, and nothing is raised
        assert inside == [(False, os.SCHED_OTHER), (False, os.SCHED_OTHER)]
    assert others == [main_policy]  # the process's other threads stay as they were
    assert os.sched_getscheduler(0) == main_policy


class Recorder:
    """An engine whose start records the starting thread's policy and the moment."""

    stage = "fio"

    def __init__(self, work_dir: Path, *, gated: bool) -> None:
        self.work_dir = work_dir
        self.gated = gated
        self.policy: int | None = None
        self.started_s = 0.0

    def prepare(self) -> None:
        pass

    def start(self) -> None:
        self.policy = os.sched_getscheduler(0)
        self.started_s = time.time()

    def poll(self) -> int | None:
        return 0

    def stop(self) -> None:
        pass

    def collect(self, scheduled_ms: int) -> Measured:
        raise AssertionError("not collected here")


class NoLease:
    live = None
    lost = threading.Event()
    cancelled = threading.Event()


def measured(tmp_path: Path, *, gated: bool) -> tuple[Recorder, float, int]:
    """The worker's ``_measure`` on a Recorder whose start instant is 100 ms away: the
    engine, when the thread was back in the worker, and the instant (Unix ms)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    config = AgentConfig(
        api_url="http://127.0.0.1:9",
        queue_uri="http://127.0.0.1:9/devstoreaccount1",
        mounts={"scratch": MountSpec.parse("scratch", str(scratch))},
        agent_id="rt",
    )
    # The API is never called here: the start instant is given (``_await_start``).
    worker = Worker(config, queues=cast(WorkQueues, None), api=ApiClient(config.api_url))
    instant = int(time.time() * 1000) + 100
    worker._await_start = lambda item, lease: instant  # type: ignore[method-assign]
    engine = Recorder(tmp_path, gated=gated)
    item = WorkItem(
        run_id="r-" + "a" * 32,
        item_id="r-" + "a" * 32 + ".s0.c0",
        step=0,
        client=0,
        clients=2,
        pool="default",
        targets=["scratch"],
        engine="fio",
        workload=Workload(size="8m"),
    )
    back: list[tuple[float, int]] = []

    def run() -> None:
        assert worker._measure(engine, item, cast(Lease, NoLease()), time.perf_counter()) == instant
        back.append((time.time(), os.sched_getscheduler(0)))

    t = threading.Thread(target=run)
    t.start()
    t.join(10)
    assert back[0][1] == os.SCHED_OTHER  # an ordinary thread again after the release
    return engine, back[0][0], instant


def test_fio_is_released_at_the_instant_from_a_realtime_thread(tmp_path: Path) -> None:
    engine, _, instant = measured(tmp_path, gated=True)
    assert engine.policy == (os.SCHED_FIFO if permitted() else os.SCHED_OTHER)
    assert engine.started_s * 1000 >= instant  # never before the instant


def test_a_start_that_launches_a_process_stays_an_ordinary_threads(tmp_path: Path) -> None:
    engine, _, instant = measured(tmp_path, gated=False)
    assert engine.policy == os.SCHED_OTHER  # DiskSpd would inherit a real-time priority
    assert engine.started_s * 1000 >= instant
