"""agent/winservice.py: the states the Windows service reports to the Service Control
Manager around one agent. advapi32 exists on Windows only, so the statuses go to a recorder
here; the agent is the real one (a bad configuration, through agent.__main__.prepare) or a
stand-in whose item takes a set time, to see a stop wait for it."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent.winservice import (
    ERROR_CALL_NOT_IMPLEMENTED,
    ERROR_SERVICE_SPECIFIC_ERROR,
    NO_ERROR,
    SERVICE_ACCEPT_PRESHUTDOWN,
    SERVICE_ACCEPT_STOP,
    SERVICE_CONTROL_PRESHUTDOWN,
    SERVICE_CONTROL_STOP,
    SERVICE_RUNNING,
    SERVICE_START_PENDING,
    SERVICE_STOP_PENDING,
    SERVICE_STOPPED,
    AgentService,
    ServiceStatus,
    agent_args,
)

ROOT = Path(__file__).resolve().parent.parent
NAMES = {1: "STOPPED", 2: "START_PENDING", 3: "STOP_PENDING", 4: "RUNNING"}


@dataclass
class Recorder:
    seen: list[tuple[str, int, int, int, int]] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def __call__(self, s: ServiceStatus) -> None:
        with self.changed:
            self.seen.append(
                (
                    NAMES[s.dwCurrentState],
                    s.dwControlsAccepted,
                    s.dwWin32ExitCode,
                    s.dwServiceSpecificExitCode,
                    s.dwCheckPoint,
                )
            )
            self.changed.notify_all()

    def wait_for(self, state: str, timeout: float = 5.0) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: any(x[0] == state for x in self.seen), timeout)

    def states(self) -> list[str]:
        return [x[0] for x in self.seen]


class StandInWorker:
    """The Worker's stop contract: first request finishes the current item, second stops."""

    def __init__(self) -> None:
        self.requests = 0
        self.stop_after_current = threading.Event()
        self.stop_now = threading.Event()

    def request_stop(self) -> None:
        self.requests += 1
        if self.stop_after_current.is_set():
            self.stop_now.set()
        self.stop_after_current.set()


@dataclass
class StandInAgent:
    item_s: float = 0.4  # the item in progress when the stop arrives
    ends_on_its_own: bool = False
    fails: bool = False
    worker: StandInWorker = field(default_factory=StandInWorker)

    def serve(self) -> int:
        if self.fails:
            raise RuntimeError("queue service refused the credential")
        if self.ends_on_its_own:
            return 0
        self.worker.stop_after_current.wait()
        self.worker.stop_now.wait(self.item_s)  # finishing the item, unless stopped now
        return 0


def start(service: AgentService) -> tuple[threading.Thread, list[int]]:
    result: list[int] = []
    t = threading.Thread(target=lambda: result.append(service.main()), daemon=True)
    t.start()
    return t, result


def test_a_stop_lets_the_current_item_finish_with_a_rising_checkpoint() -> None:
    report, agent = Recorder(), StandInAgent(item_s=0.4)
    service = AgentService(report=report, prepare=lambda: agent, checkpoint_s=0.05)
    thread, result = start(service)
    report.wait_for("RUNNING")
    running = next(x for x in report.seen if x[0] == "RUNNING")
    assert running[1] == SERVICE_ACCEPT_STOP | SERVICE_ACCEPT_PRESHUTDOWN
    t0 = time.monotonic()
    assert service.control(SERVICE_CONTROL_STOP) == NO_ERROR
    thread.join(5)
    assert time.monotonic() - t0 >= 0.4  # the item finished first
    assert result == [0] and agent.worker.requests == 1
    states = report.states()
    assert states[:2] == ["START_PENDING", "RUNNING"] and states[-1] == "STOPPED"
    pending = [x for x in report.seen if x[0] == "STOP_PENDING"]
    checkpoints = [x[4] for x in pending]
    assert len(pending) >= 3 and checkpoints == sorted(set(checkpoints))  # rising
    assert all(x[1] == 0 for x in pending)  # no control accepted while stopping
    assert report.seen[-1] == ("STOPPED", 0, NO_ERROR, 0, 0)
    time.sleep(0.15)
    assert report.states()[-1] == "STOPPED"  # nothing reported after STOPPED


def test_preshutdown_stops_now() -> None:
    report, agent = Recorder(), StandInAgent(item_s=30)
    service = AgentService(report=report, prepare=lambda: agent, checkpoint_s=0.05)
    thread, result = start(service)
    report.wait_for("RUNNING")
    service.control(SERVICE_CONTROL_PRESHUTDOWN)
    thread.join(5)
    assert not thread.is_alive() and result == [0]
    assert agent.worker.requests == 2  # the second request: now, not after the item


def test_an_agent_that_ends_or_fails_on_its_own_stops_with_an_error_to_be_restarted() -> None:
    for agent in (StandInAgent(ends_on_its_own=True), StandInAgent(fails=True)):
        report = Recorder()
        result = AgentService(report=report, prepare=lambda a=agent: a).main()  # type: ignore[misc]
        assert result == 1
        assert report.seen[-1] == ("STOPPED", 0, ERROR_SERVICE_SPECIFIC_ERROR, 1, 0)


def test_other_controls_are_not_implemented_and_stop_is_taken_once() -> None:
    report, agent = Recorder(), StandInAgent(item_s=0.2)
    service = AgentService(report=report, prepare=lambda: agent, checkpoint_s=10)
    thread, _ = start(service)
    report.wait_for("RUNNING")
    assert service.control(0x2) == ERROR_CALL_NOT_IMPLEMENTED  # PAUSE
    service.control(SERVICE_CONTROL_STOP)
    service.control(SERVICE_CONTROL_STOP)
    thread.join(5)
    assert agent.worker.requests == 2  # as a second SIGTERM: the Worker's own rule
    assert report.states().count("STOP_PENDING") == 1


@pytest.mark.slow
def test_a_bad_configuration_stops_the_service_with_status_2_and_says_why(tmp_path: Path) -> None:
    """The real agent start-up (agent.__main__.prepare) in a process of its own, logging as
    the service does: to agent.log beside the configuration, stderr included."""
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"api_url": "https://x", "queue_uri": "https://q", "pool": "Bad!"})
    )
    code = (
        "import sys, json\n"
        "from agent.__main__ import prepare\n"
        "from agent.winservice import AgentService, agent_args, log_to_file\n"
        "args, log = agent_args(sys.argv[1:])\n"
        "log_to_file(log)\n"
        "seen = []\n"
        "svc = AgentService(report=lambda s: seen.append((s.dwCurrentState, s.dwWin32ExitCode,"
        " s.dwServiceSpecificExitCode)), prepare=lambda: prepare(args, log_to_stderr=False))\n"
        "status = svc.main()\n"
        "sys.__stdout__.write(json.dumps([status, seen]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    status, seen = json.loads(out.stdout)
    assert status == 2
    assert seen == [
        [SERVICE_START_PENDING, NO_ERROR, 0],
        [SERVICE_STOPPED, ERROR_SERVICE_SPECIFIC_ERROR, 2],
    ]
    log = (tmp_path / "agent.log").read_text()
    assert "benchagent: bad configuration: pool 'Bad!' is not a valid pool name" in log


def test_the_log_file_option_is_the_services_own() -> None:
    args, log = agent_args(["--config", "C:/ProgramData/benchagent/config.json", "--once"])
    assert args == ["--config", "C:/ProgramData/benchagent/config.json", "--once"]
    assert log.name == "agent.log" and log.parent.name == "benchagent"
    args, log = agent_args(["--log-file", "/var/log/a.log", "--config", "c.json"])
    assert (args, log) == (["--config", "c.json"], Path("/var/log/a.log"))


def test_service_status_is_seven_dwords() -> None:
    assert ctypes.sizeof(ServiceStatus) == 28  # SERVICE_STATUS, winsvc.h
    assert (SERVICE_STOPPED, SERVICE_START_PENDING, SERVICE_STOP_PENDING, SERVICE_RUNNING) == (
        1,
        2,
        3,
        4,
    )
