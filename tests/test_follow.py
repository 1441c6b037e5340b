"""Following a run from the CLI: Ctrl-C during `run --wait` leaves the run running and says
how to re-attach; `benchctl follow RUN` re-attaches and ends as `run --wait` would; `status`
exits 1 for a run that failed, 0 for one still going."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.conftest import AgentFactory, TmpfsFactory, run_body, wait_state
from tests.terminal import hears_ctrl_c
from tests.test_cli_inputs import run_main


def benchctl(api: httpx.Client, *argv: str) -> subprocess.CompletedProcess[str]:
    """benchctl's main in this process, with a process's streams (the Ctrl-C test needs a
    process of its own; the others save the interpreter's start)."""
    code, out, err = run_main(["--api-url", str(api.base_url), *argv])
    return subprocess.CompletedProcess(argv, code, out, err)


def test_ctrl_c_leaves_the_run_running_and_follow_re_attaches(
    api: httpx.Client, agents: AgentFactory, pool: str
) -> None:
    agents()
    argv = [sys.executable, "-m", "benchctl", "--api-url", str(api.base_url), "run"]
    argv += ["--target", "scratch", "--pool", pool, "--size", "8m", "--runtime", "4", "--wait"]
    cli = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=hears_ctrl_c,  # as from a terminal, whatever started the tests
    )
    assert cli.stderr is not None
    first = cli.stderr.readline()  # "run r-… submitted"
    run_id = first.split()[1]
    assert first.startswith("run r-"), first
    wait_state(api, run_id, ("running",), timeout=60)
    cli.send_signal(signal.SIGINT)  # the terminal's Ctrl-C
    _, err = cli.communicate(timeout=30)
    assert cli.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "the run continues in the service" in err
    assert f"re-attach: benchctl follow {run_id}" in err
    assert api.get(f"/api/runs/{run_id}").json()["state"] in ("running", "completed")

    followed = benchctl(api, "follow", run_id, "--format", "json")
    assert followed.returncode == 0, followed.stderr
    run = json.loads(followed.stdout)
    assert run["id"] == run_id and run["state"] == "completed"
    assert run["gate"]["verdict"] in ("not-enough-history", "pass")
    assert "gate:" in followed.stderr
    # Following a finished run ends at once, with the same outcome.
    again = benchctl(api, "follow", run_id, "--format", "markdown")
    assert again.returncode == 0 and f"Run `{run_id}`" in again.stdout


def test_status_exits_1_for_a_failed_run_and_0_for_one_still_going(
    api: httpx.Client, agents: AgentFactory, pool: str, tmp_path: Path, tmpfs: TmpfsFactory
) -> None:
    tiny = tmpfs(tmp_path / "tiny", size="16m")
    agents(targets={"vol1": str(tiny)})
    body = {**run_body(pool, size="24m"), "target": "vol1"}  # does not fit: fails at once
    failed_id = api.post("/api/runs", json=body).json()["id"]
    queued_id = api.post("/api/runs", json=run_body("fuzz") | {"target": "fuzz"}).json()["id"]
    wait_state(api, failed_id, ("failed",), timeout=60)
    failed = benchctl(api, "status", failed_id)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "needs 24 MiB, 16 MiB free on vol1" in failed.stderr
    assert benchctl(api, "status", failed_id, "--format", "json").returncode == 1
    follow = benchctl(api, "follow", failed_id)
    assert follow.returncode == 1 and "Traceback" not in follow.stderr
    going = benchctl(api, "status", queued_id)  # no agent serves that pool: it waits
    assert going.returncode == 0, going.stderr
    # A follow that runs out of time says the run goes on, and how to come back.
    started = time.monotonic()
    timed_out = benchctl(api, "follow", queued_id, "--timeout", "1")
    assert timed_out.returncode == 4 and f"benchctl follow {queued_id}" in timed_out.stderr
    assert time.monotonic() - started < 20
    assert benchctl(api, "cancel", queued_id).returncode == 0
    assert benchctl(api, "status", queued_id).returncode == 1  # cancelled
