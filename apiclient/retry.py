"""Retrying what may pass, within a time budget, until a give-up event is set.

Capped exponential backoff with full jitter (tenacity's ``wait_random_exponential``, the
"Full Jitter" of AWS's "Exponential Backoff and Jitter"). tenacity rather than azure-core's
RetryPolicy: azure-core counts attempts instead of time, has no jitter in its backoff and
cannot stop on an outside event (the agent's lost lease) without a subclass; tenacity
composes all three (``stop_after_delay | stop_when_event_set``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    sleep_using_event,
    stop_after_delay,
    stop_when_event_set,
    wait_random_exponential,
)
from tenacity.stop import stop_base


def retrying(
    retry_on: type[BaseException] | tuple[type[BaseException], ...],
    *,
    budget_s: float,
    max_wait_s: float,
    give_up: threading.Event | None = None,
    before_sleep: Callable[[RetryCallState], None] | None = None,
) -> Retrying:
    """A tenacity ``Retrying`` that retries ``retry_on`` for up to ``budget_s`` (waits of
    at most ``max_wait_s``), stops at once when ``give_up`` is set (also mid-wait) and then
    re-raises the last error."""
    stop: stop_base = stop_after_delay(max(0.0, budget_s))
    if give_up is not None:
        stop = stop | stop_when_event_set(give_up)
    return Retrying(
        retry=retry_if_exception_type(retry_on),
        wait=wait_random_exponential(multiplier=0.5, max=max_wait_s),
        stop=stop,
        sleep=time.sleep if give_up is None else sleep_using_event(give_up),
        before_sleep=before_sleep or (lambda _: None),
        reraise=True,
    )
