"""The local API's port is bound by the stack itself, before the API starts, and handed to
uvicorn (``python -m benchctl.local_api --fd N``): two stacks started at once (two
worktrees, CI lanes) can both find 7071 free (benchctl.local_state.api_port_for), and the
one that starts second used to take the other's API, which already answered /api/health
on that port, for its own (its uvicorn then failed to bind and exited, unseen). Now the
second one's start is an error, and ``up`` moves its API to another port, saying so."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchctl import localstack
from benchctl.localstack import Stack, StackError
from tests.conftest import TEST_TARGETS
from tests.loopback import serve
from tests.test_local_balancer import Healthy

pytestmark = pytest.mark.stack

ENV = {"BENCH_TARGETS": json.dumps(TEST_TARGETS)}


@pytest.fixture
def other_api() -> Iterator[int]:
    """Another stack's API, healthy, on the port this stack chose a moment ago."""
    other, _ = serve(Healthy)
    try:
        yield other.server_address[1]
    finally:
        other.shutdown()
        other.server_close()


def on_port(stack: Stack, directory: Path, port: int) -> Stack:
    """The session's emulators, an API of its own on ``port`` (no timer: the session's)."""
    return dataclasses.replace(stack, dir=str(directory), api_port=port, procs=[])


def test_an_api_port_taken_since_it_was_chosen_is_an_error_not_the_other_apis(
    stack: Stack, tmp_path: Path, other_api: int
) -> None:
    mine = on_port(stack, tmp_path, other_api)
    try:
        with pytest.raises(StackError, match=f"port {other_api} is already in use"):
            localstack.start_api(mine, timer_seconds=0, extra_env=ENV)
        assert mine.procs == []  # nothing was started
    finally:
        for p in mine.procs:
            localstack.stop_proc(p, timeout=5)


def test_up_moves_the_api_to_another_port_when_its_port_was_taken_meanwhile(
    stack: Stack, tmp_path: Path, other_api: int
) -> None:
    mine = on_port(stack, tmp_path, other_api)
    try:
        localstack._start_agents_and_api(mine, 0, 0, ENV)
        (api,) = mine.procs
        assert mine.api_port == api.port != other_api
        assert mine.port_note == f"port {other_api} is in use: the API is on {mine.api_port}"
        health = httpx.get(f"{mine.api_url}/api/health", timeout=10)
        assert health.status_code == 200 and "checks" in health.json()  # ours: Healthy has none
        assert api.alive()
    finally:
        for p in mine.procs:
            localstack.stop_proc(p, timeout=5)


def test_a_stack_whose_api_port_is_0_takes_the_one_its_api_binds(
    stack: Stack, tmp_path: Path
) -> None:
    """The tests' own stack (tests/conftest.py) picks no port before its emulators start:
    one picked then was taken by the time its API bound it (a CI rehearsal, 2026-11-29)."""
    mine = on_port(stack, tmp_path, 0)
    try:
        api = localstack.start_api(mine, timer_seconds=0, extra_env=ENV)
        assert mine.api_port == api.port and mine.api_port > 0
        assert Stack.load(tmp_path) is not None
        assert Stack.load(tmp_path).api_port == mine.api_port  # type: ignore[union-attr]
        health = httpx.get(f"{mine.api_url}/api/health", timeout=10)
        assert health.status_code == 200 and "checks" in health.json()
    finally:
        for p in mine.procs:
            localstack.stop_proc(p, timeout=5)
