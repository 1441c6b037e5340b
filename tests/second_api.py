"""A second API process on the session's emulators (its own port, settings and log), for
tests that need API keys (the session's API is open) or that stop and restart the API."""

from __future__ import annotations

import dataclasses
import json
import signal
from pathlib import Path

from benchctl import localstack
from benchctl.localstack import Proc, Stack
from tests.conftest import TEST_TARGETS


class SecondApi:
    def __init__(self, stack: Stack, directory: Path, env: dict[str, str] | None = None) -> None:
        self.stack = dataclasses.replace(
            stack, dir=str(directory), api_port=localstack.free_port(), procs=[]
        )
        # No timer of its own: the session API's timer serves the same database.
        self.env = {"BENCH_TARGETS": json.dumps(TEST_TARGETS), **(env or {})}
        self.proc: Proc | None = None

    @property
    def url(self) -> str:
        return self.stack.api_url

    def start(self) -> SecondApi:
        self.proc = localstack.start_api(self.stack, timer_seconds=0, extra_env=self.env)
        return self

    def kill(self) -> None:
        """SIGKILL: no answer, no clean shutdown, as in a crash."""
        if self.proc is not None:
            localstack.stop_proc(self.proc, signal.SIGKILL, timeout=5)

    def stop(self) -> None:
        if self.proc is not None:
            localstack.stop_proc(self.proc, timeout=5)
