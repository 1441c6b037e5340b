"""The lanes (tests/lanes.py): what a process started belongs to, the markers a test gets from
its fixtures and its own markers, and the guard, in a pytest run of its own whose stand-in
`stack` and `agents` fixtures start nothing."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.lanes import lane_started_by

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("argv", "lane"),
    [
        (["/usr/bin/setpriv", "--pdeathsig", "KILL", "--", "/usr/bin/fio", "job.fio"], "fio"),
        (["nice", "-n", "-15", "fio", "--output-format=json+", "job.fio"], "fio"),
        ([sys.executable, "-m", "agent", "--api-url", "http://x"], "fio"),
        (["/venv/bin/benchagent", "--config", "c.json"], "fio"),
        (["node", "/repo/scripts/azurite.js", "queue", "--queuePort", "1"], "stack"),
        (["node", "/repo/scripts/cosmosdb-server.js", "127.0.0.1", "1"], "stack"),
        ([sys.executable, "-m", "uvicorn", "--factory", "functions.api:create_app"], "stack"),
        ([sys.executable, "-m", "benchctl.local_api", "--fd", "5"], "stack"),
        (["/venv/lib/python3.11/site-packages/playwright/driver/node", "cli.js"], "browser"),
        (["/usr/bin/chromium", "--headless"], "browser"),
        ([sys.executable, "-m", "benchctl", "aggregate", "fio.json"], None),
        (["systemd-analyze", "verify", "x.mount"], None),
        ([b"/usr/bin/fio", b"--parse-only", b"j.fio"], "fio"),  # bytes, as Popen may get them
    ],
)
def test_each_process_started_belongs_to_its_lane(argv: list[str], lane: str | None) -> None:
    assert lane_started_by(argv) == lane


INNER_CONFTEST = """
import pytest
from tests.lanes import pytest_collection_modifyitems, pytest_configure, pytest_terminal_summary

@pytest.fixture
def stack():
    return None

@pytest.fixture
def agents(stack):
    return None

@pytest.fixture
def built_on_the_stack(stack):
    return None

def pytest_collection_finish(session):
    for item in session.items:
        names = sorted(m.name for m in item.iter_markers())
        print("LANES", item.name, ",".join(names))
"""

INNER_TESTS = """
import subprocess
import sys
import threading
import pytest

def test_pure():
    pass

def test_on_the_stack(stack):
    pass

def test_through_a_fixture(built_on_the_stack):
    pass

def test_with_agents(agents):
    pass

@pytest.mark.fio
def test_marked_fio():
    pass

@pytest.mark.slow
def test_marked_slow():
    pass

@pytest.mark.unit
def test_marked_unit(stack):
    pass

def test_starts_fio_unmarked():
    subprocess.run(["setpriv", "--pdeathsig", "KILL", "--", "fio", "--version"])

def test_starts_an_agent_from_a_thread():
    t = threading.Thread(target=lambda: subprocess.run([sys.executable, "-m", "agent"]))
    t.start()
    t.join()

def test_starts_a_plain_process():
    subprocess.run([sys.executable, "-c", "pass"], check=True)

@pytest.mark.idle_agents
def test_idle_agents(agents):
    # The guard hears of a start before the exec: no agent need exist (nor cost a start).
    with pytest.raises(FileNotFoundError):
        subprocess.run(["/nonexistent/benchagent", "--pool", "p"])

@pytest.mark.idle_agents
def test_idle_agents_and_fio():
    subprocess.run(["fio", "--version"])
"""

MARKERS = """[pytest]
markers =
    unit: u
    stack: s
    fio: f
    browser: b
    timing: t
    slow: w
    idle_agents: i
"""


def test_lanes_come_from_fixtures_and_markers_and_the_guard_fails_what_they_do_not_name(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # none needed: a faster start
    pytester.makeini(MARKERS)
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", "-rf")
    out = result.stdout.str()
    lanes = dict(re.findall(r"^LANES (\S+) (\S*)$", out, re.MULTILINE))
    assert lanes == {
        "test_pure": "unit",
        "test_on_the_stack": "stack",
        "test_through_a_fixture": "stack",
        "test_with_agents": "fio,stack",
        "test_marked_fio": "fio",
        "test_marked_slow": "slow,unit",
        "test_marked_unit": "unit",
        "test_starts_fio_unmarked": "unit",
        "test_starts_an_agent_from_a_thread": "unit",
        "test_starts_a_plain_process": "unit",
        # Agents given no work: the stack lane; they may start agents, never fio.
        "test_idle_agents": "idle_agents,stack",
        "test_idle_agents_and_fio": "idle_agents,stack",
    }
    result.assert_outcomes(passed=9, failed=3)
    failed = set(re.findall(r"^FAILED test_inner.py::(\w+)", out, re.MULTILINE))
    assert failed == {
        "test_starts_fio_unmarked",
        "test_starts_an_agent_from_a_thread",
        "test_idle_agents_and_fio",
    }
    assert "test_idle_agents_and_fio started `fio --version` (lane fio)" in out
    assert (
        "test_inner.py::test_starts_fio_unmarked started `setpriv --pdeathsig KILL -- fio "
        "--version` (lane fio) but its lanes are ['unit']: mark it @pytest.mark.fio" in out
    )
    assert "test_starts_an_agent_from_a_thread started" in out
    # The summary per lane: tests, failures, seconds.
    assert re.search(r"^unit +6 tests +2 failed", out, re.MULTILINE), out
    assert re.search(r"^stack +5 tests +1 failed", out, re.MULTILINE), out
    assert re.search(r"^fio +2 tests +0 failed", out, re.MULTILINE), out
