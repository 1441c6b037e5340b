"""/api/health reports the age of each timer's last complete tick, read from the database
(so every API instance judges the same timers), and answers 503 naming the timer once that
age passes BENCH_TIMER_STALE_S (issue 24.1: the timer crashed on every tick for hours while
health said ok)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx

from adapters.cosmos import CosmosStore
from benchctl.localstack import Stack
from core.runs.timer import tick_check
from tests.conftest import wait_until
from tests.second_api import SecondApi


def test_health_reports_the_session_timers_ticks(api: httpx.Client) -> None:
    # First in a session, this may ask before the new API's first tick is recorded (its
    # health then says ok with no age: just deployed, tick_check); it comes within seconds.
    body = wait_until(
        lambda: (b := api.get("/api/health").json())["timers"]["runs"]["age_s"] is not None and b,
        timeout=10,
        what="the session API's first recorded tick",
    )
    assert body["status"] == "ok", body
    assert body["checks"]["timer.runs"] == body["checks"]["timer.schedules"] == "ok"
    # The session API ticks every 0.5 s and records at most every 5 s.
    assert body["timers"]["runs"]["age_s"] < 10, body


def test_health_is_503_naming_the_timer_when_its_ticks_stop(
    stack: Stack, tmp_path: Path, pool: str
) -> None:
    """A second API instance with no timer of its own, on a database of its own: it is
    healthy while someone records ticks there, and degraded once they stop."""
    database = f"health-{pool}"
    settings = stack.settings().model_copy(update={"cosmos_database": database})
    store = CosmosStore.from_settings(settings)
    store.ensure_containers()
    stop = threading.Event()

    def another_instances_timer() -> None:
        while not stop.is_set():
            now = int(time.time() * 1000)
            store.ticks.put("runs", now)
            store.ticks.put("schedules", now)
            stop.wait(0.3)

    ticking = threading.Thread(target=another_instances_timer, daemon=True)
    ticking.start()
    env = {"BENCH_COSMOS_DATABASE": database, "BENCH_TIMER_STALE_S": "3"}
    second = SecondApi(stack, tmp_path, env).start()
    try:
        with httpx.Client(base_url=second.url, timeout=10) as client:
            ok = client.get("/api/health")
            assert ok.status_code == 200, ok.text
            assert ok.json()["timers"]["runs"]["age_s"] < 3
            stop.set()
            ticking.join()
            store.ticks.put("schedules", int(time.time() * 1000) + 3_600_000)  # only runs stops

            def degraded() -> httpx.Response | None:
                r = client.get("/api/health")
                return r if r.status_code == 503 else None

            r = wait_until(degraded, 10, what="health to see the stale timer")
            body = r.json()
            assert body["status"] == "degraded"
            assert body["checks"]["cosmos"] == "ok"
            assert body["checks"]["timer.runs"].startswith("stale: last complete tick ")
            assert body["checks"]["timer.schedules"] == "ok"
            assert body["timers"]["runs"]["age_s"] >= 3  # rounded to 0.1 s
    finally:
        stop.set()
        second.stop()


def test_tick_check() -> None:
    up = 1_000_000
    assert tick_check(None, up + 1_000, 300, up) == "ok"  # just started
    assert tick_check(None, up + 301_000, 300, up).startswith("stale: no complete tick")
    assert tick_check(up, up + 300_000, 300, 0) == "ok"
    assert tick_check(up, up + 301_000, 300, 0) == (
        "stale: last complete tick 301 s ago (stale after 300 s)"
    )
