"""The agent at its step's start barrier: ready, then wait to hear the common instant.

Where the API holds barrier calls (its claim's answer offers ``barrier_wait_ms``), the agent
sends its ready report, which the API holds as its first barrier call (an older API answers
it at once, and a barrier call follows at once), and then a barrier call when OVERLAP_MS of
the last one's wait are left (or at once when it came back): each is held at the API while
the step waits, so that from the ready report on one is held at every moment and hears "go"
when its API process sees the instant (core.runs.barrier_watch; core.runs.barrier_timing
sizes the lead on that). A barrier call that reaches the API after the instant was set
answers "go" at once, within the round trip of a call sent when the ready report was. At
most three calls at once, on threads of their own; a go or an abort from any of them is
the answer, a failure of one is raised once no other call is left to answer; once there is
an answer none still out is retried. Otherwise (an
older API) a poll every ``barrier_poll_ms``. Either way the stop conditions are checked
while waiting, at least every 0.2 s.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from agent.api_client import ApiClient
from agent.outcome import Outcome
from core.models import WorkItem
from core.runs.barrier_timing import OVERLAP_MS, barrier_poll_ms
from core.runs.protocol import BarrierDecision

Interrupted = Callable[[], Outcome | None]  # why to stop now, or None
Call = Callable[[WorkItem, str, threading.Event], BarrierDecision]


def hear_start(
    api: ApiClient, item: WorkItem, agent: str, interrupted: Interrupted
) -> BarrierDecision | Outcome:
    """The barrier's answer that is not "wait" (go or abort), or why the agent stopped."""
    if api.holds_barrier:
        return _held(api, item, agent, interrupted)
    return _poll(api, item, agent, interrupted)


def _poll(
    api: ApiClient, item: WorkItem, agent: str, interrupted: Interrupted
) -> BarrierDecision | Outcome:
    barrier = api.ready(item, agent)
    while barrier.status == "wait":
        stop = interrupted()
        if stop:
            return stop
        time.sleep(barrier_poll_ms(item.clients) / 1000)
        barrier = api.barrier(item, agent)
    return barrier


def _held(
    api: ApiClient, item: WorkItem, agent: str, interrupted: Interrupted
) -> BarrierDecision | Outcome:
    every_s = max(api.barrier_wait_ms - OVERLAP_MS, api.barrier_wait_ms // 2) / 1000
    calls = ThreadPoolExecutor(3, thread_name_prefix="barrier")
    # Set on the way out: a call still out is not retried (a barrier call answered after
    # the instant would give the item an instant of its own, core.runs.protocol).
    answered_or_stopped = threading.Event()

    def send(call: Call) -> Future[BarrierDecision]:
        # In this stage's trace context (agent.tracing), as a call made here would be.
        run = contextvars.copy_context().run
        return calls.submit(run, call, item, agent, answered_or_stopped)

    failed: Exception | None = None
    asked = False  # a barrier call was sent: a failure of the ready report alone is not final
    try:
        # Held at the API as the first barrier call (issue 29.3: one call and two reads
        # fewer per client in the start-up storm than a barrier call sent beside it); with
        # an API that answers it at once, a barrier call goes beside it.
        pending = {send(api.ready)}
        if not api.holds_ready and item.clients > 1:
            pending.add(send(api.barrier))
            asked = True
        next_at = time.monotonic() + every_s
        while True:
            until_next = max(0.0, next_at - time.monotonic())
            done, pending = wait(pending, min(0.2, until_next), FIRST_COMPLETED)
            for answered in done:
                try:
                    barrier = answered.result()
                except Exception as e:  # a refusal or an outage: raised unless another answers
                    failed = e
                    continue
                if barrier.status != "wait":
                    return barrier
            if failed is not None and not pending:
                if asked:
                    raise failed
                # Only the ready report failed (refused after an outage once its item moved
                # on, a heartbeat having made it running): a barrier call says where it is.
                failed = None
            stop = interrupted()
            if stop:
                return stop
            if failed is None and (not pending or time.monotonic() >= next_at):
                pending.add(send(api.barrier))
                asked = True
                next_at = time.monotonic() + every_s
    finally:
        answered_or_stopped.set()
        calls.shutdown(wait=False, cancel_futures=True)  # a call still held ends by itself
