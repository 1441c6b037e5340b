"""`benchctl local down` leaves nothing running, even an agent the API's pool scaler starts
while the stack is being stopped (CI's rehearsals each left one such agent of
test_fleet's elastic pool polling a queue service that was gone)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from benchctl import localstack
from benchctl.localstack import Proc, Stack

# Its agents are given no work (no fio): the stack lane, beside the fio lane in make test.
pytestmark = [pytest.mark.stack, pytest.mark.idle_agents]


def test_an_agent_started_while_the_stack_stops_is_stopped_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "scratch").mkdir()
    directory = tmp_path / "stack"
    localstack.up(agents=1, targets={"scratch": str(tmp_path / "scratch")}, directory=directory)
    late: list[Proc] = []
    real_stop = localstack.stop_proc

    def stop(p: Proc) -> None:
        if p.name == "api" and not late:
            # As the API's timer would: the scaler loads the file and adds an agent after
            # `down` has read it.
            scaler_view = Stack.load(directory)
            assert scaler_view is not None
            late.append(localstack.start_agent(scaler_view, "late", pool="default"))
        real_stop(p)

    monkeypatch.setattr(localstack, "stop_proc", stop)
    stopped = localstack.down(directory)
    assert late and "agent-late" in stopped
    deadline = time.monotonic() + 10
    while late[0].alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not late[0].alive()
    assert not (directory / "stack.json").exists()
