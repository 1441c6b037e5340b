"""Test lanes: each test is marked with what it needs, so a lane can run alone (`make unit`)
and `make test` can run side by side what is safe to (README, "Tests and lanes").

- ``unit``: no server, no fio, no browser. ``make unit`` runs these, less slow and timing.
- ``stack``: the session's local servers (Azurite, the Cosmos DB server, the API) or its own.
- ``fio``: a real fio, run by an agent or by the test. Serial in ``make test``.
- ``browser``: headless Chromium through Playwright.
- ``timing``: asserts on wall-clock time. Serial in ``make test``. Explicit only.
- ``slow``: needs no server but takes over ``SLOW_S`` alone. Explicit only; a run in one
  process names the unit tests that took longer without it.

``fio_beside`` is no lane either, but a claim a fio test makes: nothing it asserts depends on
the machine's throughput or on being alone on it (no figure held to a known load such as a
rate cap, no count of every fio, agent or process of the machine; it kills only its own
processes), so `make test` runs it in a second fio lane beside the first, which keeps the tests
that hold a figure to a known load (docs/testing.md, "make test"). Its
``fio`` comes from its fixtures or its own marker, as any fio test's.

``idle_agents`` is no lane but a promise: the test starts agents and gives them no work
(they register, beat and stop; no fio runs), so it is a ``stack`` test, not a ``fio`` one,
and the guard lets it start agents, never fio itself.

The lanes come from the fixtures a test uses (their closure, so a fixture built on ``stack``
counts). An explicit marker adds what that cannot see (a test that starts an agent or fio
itself); an explicit ``unit`` says the test needs none of it. A guard keeps this honest: a
test that starts a server, an agent, fio or a browser its lanes do not name fails with the
marker it needs, so a misfiled test cannot start fio beside a parallel worker or break
``make unit``. It sees the processes the test's own process (or a fork of it) starts, not
those a CLI run as a subprocess starts in turn (`benchctl local up`): mark such a test."""

from __future__ import annotations

import itertools
import os
import shlex
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

SLOW_S = 3.0
SERVER_LANES = ("stack", "fio", "browser")
LANES = ("unit", *SERVER_LANES, "timing", "slow")
# What a test that takes one of these fixtures needs (agents start the stack and run fio).
FIXTURE_LANES = {
    "stack": {"stack", "api", "store", "queues", "artifacts", "agents"},
    "fio": {"agents"},
    "browser": {"browser"},
}


def lanes_of(item: pytest.Item) -> set[str]:
    explicit = {m.name for m in item.iter_markers() if m.name in LANES}
    if "unit" in explicit:
        found: set[str] = set()
    else:
        uses = set(getattr(item, "fixturenames", ()))
        found = {lane for lane, fixtures in FIXTURE_LANES.items() if uses & fixtures}
    found |= explicit - {"unit"}
    if item.get_closest_marker("idle_agents"):
        found = (found - {"fio"}) | {"stack"}
    if not found & set(SERVER_LANES):
        found.add("unit")
    return found


def lane_started_by(argv: Sequence[str]) -> str | None:
    """The lane a process started with ``argv`` belongs to, if any. Any word counts, not just
    the first: fio runs behind `setpriv ... --` or `nice -n -15`."""
    args = [os.fsdecode(a) for a in argv]
    names = {Path(a).name for a in args}
    if "fio" in names or is_agent(argv):
        return "fio"
    pairs = set(itertools.pairwise(args))
    api = {("-m", "uvicorn"), ("-m", "benchctl.local_api")}
    if api & pairs or {"azurite.js", "cosmosdb-server.js"} & names:
        return "stack"
    if {"chromium", "chrome", "headless_shell"} & names or any("playwright" in a for a in args):
        return "browser"
    return None


def is_agent(argv: Sequence[str]) -> bool:
    """An agent (`benchagent` or `python -m agent`): fio's lane, unless given no work."""
    args = [os.fsdecode(a) for a in argv]
    return "benchagent" in {Path(a).name for a in args} or ("-m", "agent") in set(
        itertools.pairwise(args)
    )


class Guard:
    """Fails a test that starts what its lanes do not name (an audit hook sees every
    process this one starts: subprocess, os.exec*, os.posix_spawn, os.system)."""

    def __init__(self) -> None:
        self.test: tuple[str, set[str], bool] | None = None  # node id, lanes, idle agents
        self.broken: dict[str, str] = {}
        sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if self.test is None:
            return
        if event == "subprocess.Popen":
            argv = args[1] if isinstance(args[1], list | tuple) else shlex.split(str(args[1]))
        elif event in ("os.exec", "os.posix_spawn"):
            argv = args[1]
        elif event == "os.system":
            argv = shlex.split(os.fsdecode(args[0]))
        else:
            return
        lane = lane_started_by(argv)
        nodeid, lanes, idle_agents = self.test
        if idle_agents and is_agent(argv):
            return
        if lane is not None and lane not in lanes:
            shown = " ".join(os.fsdecode(a) for a in list(argv)[:6])
            message = (
                f"{nodeid} started `{shown}` (lane {lane}) but its lanes are "
                f"{sorted(lanes)}: mark it @pytest.mark.{lane} (tests/lanes.py)"
            )
            self.broken.setdefault(nodeid, message)
            raise RuntimeError(message)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        self.test = (
            item.nodeid,
            lanes_of(item),
            item.get_closest_marker("idle_agents") is not None,
        )
        try:
            yield
        finally:
            self.test = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item) -> Iterator[None]:
        outcome = yield
        report = outcome.get_result()  # type: ignore[attr-defined]
        # A process started from a thread of the test raises there, maybe unseen: fail it.
        if item.nodeid in self.broken and report.when == "call" and report.passed:
            report.outcome = "failed"
            report.longrepr = self.broken[item.nodeid]


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Guard(), "lanes-guard")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        # Agents keep their work directories under the temp dir by agent id, and every
        # worker's stack has the same pools and ids: a temp dir per worker keeps them apart.
        tmp = Path(tempfile.gettempdir()) / f"xdist-{worker}"
        tmp.mkdir(exist_ok=True)
        os.environ["TMPDIR"] = str(tmp)
        tempfile.tempdir = None


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the markers set here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for lane in lanes_of(item) - {m.name for m in item.iter_markers()}:
            item.add_marker(lane)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = longest_modules_first(items)


# The parallel phase hands out whole modules in the order collected (`--dist loadscope
# --no-loadscope-reorder`; xdist's own order is by test count, which starts with the many
# short unit tests): the known long module first, then those that use the stack, so that no
# worker is left alone with a long one at the end while the short ones fill in the gaps.
LONG_FIRST = ("tests/test_openapi_fuzz.py",)  # Schemathesis: over a third of the parallel phase


def longest_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    on_stack = {module(i) for i in items if i.get_closest_marker("stack")}
    first_seen: dict[str, int] = {}
    for i in items:
        first_seen.setdefault(module(i), len(first_seen))

    def rank(item: pytest.Item) -> tuple[int, int]:
        name = module(item)
        return (0 if name in LONG_FIRST else 1 if name in on_stack else 2), first_seen[name]

    return sorted(items, key=rank)  # stable: a module's tests keep their order


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Per lane: tests, failures and the seconds they took (summed over tests, so a
    parallel lane's sum exceeds its wall time)."""
    seen: dict[str, tuple[set[str], bool, float]] = {}
    for reports in terminalreporter.stats.values():
        for r in reports:
            if getattr(r, "when", None) not in ("setup", "call", "teardown"):
                continue
            lanes, failed, secs = seen.get(r.nodeid, (set(), False, 0.0))
            lanes = lanes | {lane for lane in LANES if lane in r.keywords}
            seen[r.nodeid] = (lanes, failed or r.failed, secs + r.duration)
    if not seen:
        return
    terminalreporter.section("lanes")
    for lane in LANES:
        mine = [(bad, secs) for lanes, bad, secs in seen.values() if lane in lanes]
        if mine:
            failures = sum(bad for bad, _ in mine)
            total = sum(secs for _, secs in mine)
            terminalreporter.line(
                f"{lane:8} {len(mine):4} tests {failures:3} failed {total:8.1f} s"
            )
    if terminalreporter.config.getoption("numprocesses", None):
        return  # side by side, a test's seconds say more about its neighbour than itself
    for nodeid, (lanes, _, secs) in sorted(seen.items(), key=lambda kv: -kv[1][2]):
        if lanes == {"unit"} and secs > SLOW_S:
            terminalreporter.line(
                f"unit, over {SLOW_S:g} s, not marked slow: {nodeid} ({secs:.1f} s)"
            )
