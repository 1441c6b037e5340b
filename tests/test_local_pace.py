"""The local timer's pace (functions.timers.LocalPace): its period while the API is in use,
slower once nobody called for a while, and woken at once by the next request."""

from __future__ import annotations

import asyncio
import time

import pytest

from functions.timers import LocalPace

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_period_holds_while_requests_come_and_slows_when_they_stop() -> None:
    clock = Clock()
    pace = LocalPace(0.5, clock)
    assert pace.next_sleep_s() == 0.5
    clock.now += LocalPace.IDLE_AFTER_S - 0.1
    assert pace.next_sleep_s() == 0.5
    clock.now += 0.2
    assert pace.next_sleep_s() == 0.5 * LocalPace.IDLE_FACTOR
    pace.used()
    assert pace.next_sleep_s() == 0.5


def test_an_idle_timer_wakes_at_the_next_request() -> None:
    clock = Clock()
    pace = LocalPace(0.5, clock)
    clock.now += LocalPace.IDLE_AFTER_S + 1

    async def main() -> float:
        began = time.monotonic()
        sleeping = asyncio.create_task(pace.sleep(steady=False))
        await asyncio.sleep(0.05)
        assert not sleeping.done()  # idle: longer than its 0.5 s period ahead
        pace.used()
        await asyncio.wait_for(sleeping, 1.0)
        return time.monotonic() - began

    assert asyncio.run(main()) < 0.3


def test_a_timer_holding_a_lease_keeps_its_period_when_idle() -> None:
    """With several instances the holder renews the timers' lease each tick: it may not
    sleep past the lease, whoever is called."""
    clock = Clock()
    pace = LocalPace(0.1, clock)
    clock.now += LocalPace.IDLE_AFTER_S + 1

    async def main() -> float:
        began = time.monotonic()
        await pace.sleep(steady=True)
        return time.monotonic() - began

    assert 0.09 <= asyncio.run(main()) < 0.5
