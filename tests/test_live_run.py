"""The live view of a real run (issue 26.5): two agents run fio capped at a known rate while
the API's live endpoint is polled, ``benchctl follow`` runs in a terminal (a pty) and the
live page is open in Chromium. One run for the module, watched by all three at once; each
test then checks what one of them saw.

The known load: rate_iops RATE per client (fio holds each second to it), so each client's
live IOPS, each second, is RATE and the total 2 x RATE."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser

from benchctl import localstack
from benchctl.localstack import Stack
from tests.browser import Watched, chromium
from tests.conftest import _agent_ids, _pool_names, run_body, wait_state, wait_until
from tests.terminal import hears_ctrl_c

RATE = 400  # I/Os per second per client
CLIENTS = 2
RUNTIME_S = 6
RAMP_S = 1
# fio's rate limiter keeps each second within a few I/Os of its cap; each interval is timed
# by fio's runtime (its last status output comes after fio stopped: core.engines.fio_live).
PER_SECOND = 0.05
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")
# The follow's total row: IOPS, MiB/s, latency (rich's table, escape codes removed).
TOTAL_ROW = re.compile(r"│ total\s*│\s*│\s*([\d,]+)\s*│\s*([\d.]+)\s*│\s*([\d.]+ [µm]s)")

# Its module fixture starts agents that run fio, and a browser (tests/lanes.py cannot see
# the agents: they are started by a helper, not a fixture it knows).
# Per-second live figures held to a rate cap: with nothing else of the suite (timing phase).
pytestmark = [pytest.mark.fio, pytest.mark.browser, pytest.mark.timing]


@dataclass
class Seen:
    run_id: str = ""
    views: list[dict[str, Any]] = field(default_factory=list)  # the API's, polled
    cli: str = ""  # what the terminal showed, escape codes removed
    cli_rc: int | None = None
    page: list[dict[str, Any]] = field(default_factory=list)  # the live page's table, twice
    run: dict[str, Any] = field(default_factory=dict)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)


def _poll(api: httpx.Client, seen: Seen, done: threading.Event) -> None:
    while not done.is_set():
        r = api.get(f"/api/runs/{seen.run_id}/live")
        assert r.status_code == 200, r.text
        seen.views.append(r.json())
        done.wait(0.5)


def _terminal(stack: Stack, seen: Seen) -> None:
    """``benchctl follow`` on a pseudo-terminal, as a person runs it, until its live table
    has shown the total a few times; then Ctrl-C."""
    master, slave = os.openpty()
    env = {**os.environ, "BENCH_API_URL": stack.api_url, "BENCH_API_KEY": ""}
    env.update(TERM="xterm-256color", COLUMNS="150", LINES="40")
    cli = subprocess.Popen(
        [sys.executable, "-m", "benchctl", "follow", seen.run_id],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
        preexec_fn=hears_ctrl_c,  # as from a terminal, whatever started the tests
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and cli.poll() is None:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                out += os.read(master, 65536)
            if len(TOTAL_ROW.findall(ANSI.sub("", out.decode(errors="replace")))) >= 3:
                break
        cli.send_signal(signal.SIGINT)  # the terminal's Ctrl-C
        cli.wait(30)
        while select.select([master], [], [], 0.2)[0]:
            try:
                out += os.read(master, 65536)
            except OSError:
                break  # the other end closed
    finally:
        os.close(master)
        if cli.poll() is None:
            cli.kill()
    seen.cli, seen.cli_rc = ANSI.sub("", out.decode(errors="replace")), cli.returncode


def _table(page: Watched) -> dict[str, Any]:
    rows: list[list[str]] = page.page.evaluate(
        """() => [...document.querySelectorAll('#live-table tbody tr')].map(
             tr => [...tr.cells].map(td => td.textContent))"""
    )
    step = page.page.inner_text("#live-step")
    return {"rows": rows, "label": page.page.inner_text("#live-label"), "step": step}


def _open_page(stack: Stack, browser: Browser, seen: Seen) -> Watched:
    """The live page, opened as the run is submitted: it waits for the first second."""
    page = Watched(browser.new_page(viewport={"width": 1280, "height": 1000}))
    page.page.goto(f"{stack.api_url}/ui/runs/{seen.run_id}/live")
    return page


def _watch_page(page: Watched, seen: Seen) -> None:
    total = "#live-table tr.total td.live-iops"
    page.page.wait_for_function(
        f"document.querySelector('{total}') && document.querySelector('{total}')"
        ".textContent !== '-'",
        timeout=20_000,
    )
    first = _table(page)
    # The next second: the same row's "second ending" moves on.
    page.page.wait_for_function(
        "(before) => document.querySelector('#live-table tr.total td:last-child')"
        ".textContent !== before",
        arg=first["rows"][-1][-1],
        timeout=10_000,
    )
    seen.page = [first, _table(page)]
    # A few seconds on the chart before the picture.
    page.page.wait_for_function(
        "document.getElementById('live-iops').data && "
        "document.getElementById('live-iops').data[0].x.length >= 4",
        timeout=10_000,
    )
    page.shot("live-run.png", docs=True)
    seen.page.append({"errors": page.errors, "charts": page.charts()})
    page.page.close()


@pytest.fixture(scope="module")
def seen(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seen]:
    pool = next(_pool_names)
    # On tmpfs: the cap is the load whatever the disks of this shared machine do meanwhile.
    mount = tmp_path_factory.mktemp("live-tmpfs")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], check=True)
    procs = []
    for k in range(CLIENTS):
        (mount / str(k)).mkdir()
        procs.append(
            localstack.start_agent(
                stack, f"{pool}-{next(_agent_ids)}", pool=pool, targets={"scratch": f"{mount}/{k}"}
            )
        )
    seen, done = Seen(), threading.Event()
    body = run_body(pool, runtime=RUNTIME_S, ramp_time=RAMP_S, iodepth=1, rate_iops=RATE)
    try:
        with httpx.Client(base_url=stack.api_url, timeout=30) as api, chromium() as browser:
            seen.run_id = api.post("/api/runs", json=body | {"clients": CLIENTS}).json()["id"]
            poller = threading.Thread(target=_poll, args=(api, seen, done))
            poller.start()
            page = _open_page(stack, browser, seen)
            wait_state(api, seen.run_id, ("running",), timeout=60)
            # A second measured on every client: the live total is there to be seen.
            wait_until(lambda: any(v["total"] for v in seen.views), 20, what="live total")
            terminal = threading.Thread(target=_terminal, args=(stack, seen))
            terminal.start()
            _watch_page(page, seen)
            terminal.join(60)
            seen.run = wait_state(api, seen.run_id, ("completed", "failed"), timeout=60)
            done.set()
            poller.join(10)
            for item in seen.run["items"]:
                path = f"/api/runs/{seen.run_id}/results/{item['id']}"
                seen.results[item["id"]] = api.get(path).json()
        yield seen
    finally:
        done.set()
        for p in procs:
            localstack.stop_proc(p, signal.SIGKILL, timeout=5)
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


def test_live_iops_per_client_and_total_hold_the_rate_cap(seen: Seen) -> None:
    assert seen.run["state"] == "completed", seen.run.get("error")
    last = seen.views[-1]
    assert last["latency"] == "total" and last["note"].startswith("live:")
    assert last["step"] == 0 and [c["client"] for c in last["clients"]] == [0, 1]
    assert last["step_clients"] == CLIENTS
    for c in last["clients"]:
        seconds = c["seconds"]
        # The measured 6 s, in fio's status intervals (the ramp's are not live figures).
        assert len(seconds) >= RUNTIME_S - 1, seconds
        for s in seconds:
            assert s["live_iops"] == pytest.approx(RATE, rel=PER_SECOND), seconds
            assert s["live_mib_s"] == pytest.approx(s["live_iops"] * 4096 / 2**20, rel=0.01)
            assert s["read"]["live_iops"] == s["live_iops"] and s["write"] is None
            assert 0 < s["live_lat_mean_ns"] < 50e6
    total = last["total"]
    assert len(total) >= RUNTIME_S - 2, total
    for s in total:
        assert s["end_ms"] - s["start_ms"] == 1000
        assert s["live_iops"] == pytest.approx(CLIENTS * RATE, rel=PER_SECOND), total
    # Polled while it ran, the figures came in second by second, not all at the end.
    grew = [len(v["total"]) for v in seen.views if v["state"] == "running"]
    assert len(set(grew)) >= 3, grew


def test_live_counts_are_fios_own_and_the_final_figures_are_apart(seen: Seen) -> None:
    """The live samples add up to what fio's final output counted, bar its last moments
    (the final output's few ms after the last status output, or a sample whose heartbeat
    never came because the item ended first). The results are fio's final figures."""
    last = seen.views[-1]
    for c in last["clients"]:
        result = seen.results[c["item_id"]]
        final = result["read"]["total_ios"]
        live = sum(
            round(s["read"]["live_iops"] * (s["end_ms"] - s["start_ms"]) / 1000)
            for s in c["seconds"]
        )
        assert 0 <= final - live <= 1.5 * RATE + 8, (final, live)
        assert "live" not in str(result.keys())


def test_follow_shows_a_live_table_per_client_and_ctrl_c_detaches(seen: Seen) -> None:
    out = seen.cli
    assert seen.cli_rc == 130, out
    assert "LIVE · step 0 · 2 of 2 clients" in out and "not the results" in out, out
    assert "live IOPS" in out and "live total lat (mean)" in out
    assert "latency: total (submission + completion)" in out
    frames = TOTAL_ROW.findall(out)
    assert len(frames) >= 3, out
    for iops, mib_s, _ in frames:
        assert float(iops.replace(",", "")) == pytest.approx(CLIENTS * RATE, rel=PER_SECOND)
        assert float(mib_s) == pytest.approx(CLIENTS * RATE * 4096 / 2**20, rel=PER_SECOND)
    for client in range(CLIENTS):
        assert re.search(rf"│ {client}\s*│ agent-", out), out
    assert "the run continues in the service" in out
    assert "Traceback" not in out


def test_the_live_page_shows_numbers_that_change_labelled_live(seen: Seen) -> None:
    first, second, rest = seen.page
    assert rest["errors"] == []
    for table in (first, second):
        assert table["label"] == "LIVE"
        assert table["step"] == "step 0, 2 of 2 clients reporting"
        rows = table["rows"]
        assert [r[0] for r in rows] == ["client 0", "client 1", "total"]
        total_iops = float(rows[-1][2].replace(",", ""))
        assert total_iops == pytest.approx(CLIENTS * RATE, rel=PER_SECOND)
        assert re.fullmatch(r"[\d.]+ (µs|ms)", rows[-1][4]), rows
    assert first["rows"][-1][-1] != second["rows"][-1][-1]  # a later second
    # The chart drew every total second at the cap, each line named live.
    iops = rest["charts"]["live-iops"]
    assert [t["name"] for t in iops] == ["total (live)", "client 0 (live)", "client 1 (live)"]
    assert len(iops[0]["y"]) >= 4
    assert all(y == pytest.approx(CLIENTS * RATE, rel=PER_SECOND) for y in iops[0]["y"])
    latency = rest["charts"]["live-latency"]
    assert all(t["name"].endswith("(live)") for t in latency) and len(latency[0]["y"]) >= 4
