"""Held barrier calls (issue 29.3): one read of a step per API process and interval, however
many of its agents' calls the process holds.

An agent that waits at its step's start barrier asks the API to hold its call
(functions.agent_api, ``wait_ms``) rather than polling every 100-250 ms. The call is
answered as a poll first; while the answer is "wait", the process's :class:`StepWatch` reads
the step every ``every_s`` (one task per step with held calls, in the process's event loop)
and wakes every call it holds for the step at once, when the step's start instant is set,
the step fails, or its deadline passes: each then answers as a poll does (its item read
again, the step as the watch read it). A call's bound passing answers "wait" and the agent
asks again at once. The process whose ready report set the instant pokes its own watch
(:meth:`StepWatch.poke`), which reads the step at once rather than at its next tick: the
calls it holds hear "go" without the watch's wait, and so do the "go took" figures their
agents report, which the lead adds WATCH_MS to (core.runs.barrier_timing; before, a
report carried that step's wait, 0-50 ms, and the lead added WATCH_MS again).

Nothing here is shared between processes: each API instance behind the balancer watches the
steps of the calls it holds, and a call dropped with its instance is retried by the agent
(agent.api_client) on another. Pure asyncio over a read function (no SDK).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from core.errors import NotFound
from core.models.stored import Step

log = logging.getLogger(__name__)

ReadStep = Callable[[str, int], Step]  # run id, step -> the step as stored (blocking)


def moved(step: Step | None, now_ms: int) -> bool:
    """Whether a held call must be answered now: the step started or failed, its deadline
    passed (a poll then settles or fails it), or it is gone (None)."""
    if step is None or step.start_at_ms is not None or step.failed_reason:
        return True
    return step.deadline_ms is not None and now_ms > step.deadline_ms


@dataclass
class _Watch:
    woken: asyncio.Event = field(default_factory=asyncio.Event)
    step: Step | None = None  # as last read
    waiters: int = 0
    task: asyncio.Task[None] | None = None
    poked: asyncio.Event = field(default_factory=asyncio.Event)  # read now, not at the tick


class StepWatch:
    """The held calls of one event loop (an API process's), by step."""

    def __init__(self, read: ReadStep, every_s: float, now_ms: Callable[[], int]) -> None:
        self._read = read
        self.every_s = every_s
        self._now_ms = now_ms
        self._watches: dict[tuple[str, int], _Watch] = {}
        self.reads = 0  # the steps read, for the tests

    async def wait(self, run_id: str, step: int, timeout_s: float) -> tuple[bool, Step | None]:
        """Hold until the step moves (see :func:`moved`) or ``timeout_s`` passes: whether it
        moved, and the step as last read (None when it is gone or was not read yet)."""
        key = (run_id, step)
        w = self._watches.get(key)
        if w is None:
            w = self._watches[key] = _Watch()
            w.task = asyncio.create_task(self._watch(key, w))
        w.waiters += 1
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(w.woken.wait(), timeout_s)
            return w.woken.is_set(), w.step
        finally:
            w.waiters -= 1
            if w.waiters == 0 and self._watches.get(key) is w:
                # Nobody waits for this step here any more: stop reading it.
                del self._watches[key]
                if w.task is not None:
                    w.task.cancel()

    def poke(self, run_id: str, step: int) -> None:
        """The step just moved in this process (its instant set): the watch of it, if any
        call waits for it here, reads it now instead of at its next tick."""
        w = self._watches.get((run_id, step))
        if w is not None:
            w.poked.set()

    async def _watch(self, key: tuple[str, int], w: _Watch) -> None:
        run_id, step = key
        while True:
            began = time.monotonic()
            try:
                w.step = await asyncio.to_thread(self._read, run_id, step)
            except NotFound:
                w.step = None
            except Exception:  # crash-only: a failed read is tried again at the next tick
                log.warning("barrier watch: reading step %d of %s failed", step, run_id)
                await asyncio.sleep(self.every_s)
                continue
            self.reads += 1
            if moved(w.step, self._now_ms()):
                if self._watches.get(key) is w:
                    del self._watches[key]  # calls held from now on watch afresh
                w.woken.set()
                return
            # Every every_s from the start of a read to the next's, however long reads take,
            # or at once when poked (a poke during the read above reads again).
            with contextlib.suppress(TimeoutError):
                left = max(0.0, self.every_s - (time.monotonic() - began))
                await asyncio.wait_for(w.poked.wait(), left)
            w.poked.clear()
