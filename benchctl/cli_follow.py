"""Following a run until it ends (``benchctl follow RUN``, ``run --wait``): a progress bar
per step and client and, while a step measures, the live table (benchctl.cli_live), the
run's outcome at the end (benchctl.outcome). Ctrl-C stops the following, never the run: it
says so and how to re-attach."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

from apiclient import retrying
from benchctl.cli_common import (
    EXIT_INTERRUPTED,
    EXIT_TIMEOUT,
    FORMATS,
    RUN_ID,
    TERMINAL,
    _api,
)
from benchctl.cli_live import LiveBoard
from benchctl.client import Api, ApiUnavailable, CliError
from benchctl.outcome import add_outcome_flags, finish


def _step_seconds(step: dict[str, Any]) -> int:
    w = step.get("workload") or {}
    return int(w.get("ramp_time", 0)) + int(w.get("runtime", 0)) or 1


def _progress_rows(run: dict[str, Any], now_ms: int) -> list[tuple[str, str, int, float]]:
    """(task key, description, total seconds, seconds done) per step and client."""
    steps = {s["step"]: s for s in run.get("steps", [])}
    rows = []
    if run["state"] == "waiting":
        pos = run.get("queue_position", "?")
        rows.append(("run", f"waiting for {run['target']}: position {pos}", 1, 0.0))
    for item in run["items"]:
        step = steps.get(item["step"], {})
        total = _step_seconds(step)
        start = item.get("start_at_ms") or step.get("start_at_ms")  # own instant if rejoined
        if item["state"] in ("completed", "failed", "cancelled"):
            done = float(total)
        elif item["state"] == "running" and start:
            done = min(float(total), max(0.0, (now_ms - start) / 1000))
        else:
            done = 0.0
        agent = item.get("agent_id") or "unclaimed"
        # Escaped: rich would take "[agent-1]" for markup and print nothing of it.
        desc = escape(f"step {item['step']} client {item['client']} [{agent}]: {item['state']}")
        rows.append((item["id"], desc, total, done))
    return rows


def _poll(
    api: Api, run_id: str, deadline: float, timeout_s: float, console: Console
) -> dict[str, Any]:
    """The run, read again through API restarts, timeouts and 5xx answers (capped,
    jittered backoff) until the wait's own deadline: the run carries on meanwhile."""

    def get() -> dict[str, Any]:
        left = deadline - time.monotonic()
        return api.get(run_id, timeout=min(30.0, max(1.0, left)))

    def note(state: Any) -> None:
        console.print(f"[yellow]{state.outcome.exception()}; retrying[/yellow]")

    retry = retrying(
        ApiUnavailable,
        budget_s=deadline - time.monotonic(),
        max_wait_s=5,
        before_sleep=note,
    )
    try:
        return retry(get)
    except ApiUnavailable as e:
        raise CliError(
            f"run {run_id}: no answer from the API within {timeout_s:.0f} s: {e}", EXIT_TIMEOUT
        ) from e


def wait_for(api: Api, run_id: str, *, timeout_s: float, quiet: bool) -> dict[str, Any]:
    """Follow a run with one progress bar per step and client, and the live table while a
    step measures (on stderr; neither is left on the screen at the end)."""
    deadline = time.monotonic() + timeout_s
    console = Console(stderr=True)
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
    )
    board = LiveBoard()
    display = Live(Group(progress, board), console=console, transient=True)
    if not quiet:
        display.start()
    try:
        tasks: dict[str, Any] = {}
        while True:
            run = _poll(api, run_id, deadline, timeout_s, console)
            if not quiet:
                board.update(api, run_id, run["state"])
            for key, desc, total, done in _progress_rows(run, int(time.time() * 1000)):
                if key not in tasks:
                    tasks[key] = progress.add_task(desc, total=total)
                progress.update(tasks[key], description=desc, total=total, completed=done)
            if run["state"] != "waiting" and "run" in tasks:
                progress.remove_task(tasks.pop("run"))
            if run["state"] in TERMINAL:
                return run
            if time.monotonic() > deadline:
                raise CliError(
                    f"run {run_id} still {run['state']} after {timeout_s:.0f} s; it goes on: "
                    f"benchctl follow {run_id}",
                    EXIT_TIMEOUT,
                )
            time.sleep(1.0)
    finally:
        if not quiet:
            display.stop()


def follow(api: Api, run_id: str, a: argparse.Namespace) -> int:
    """Wait for the run, then end with its outcome; Ctrl-C leaves the run running."""
    try:
        run = wait_for(api, run_id, timeout_s=a.timeout, quiet=a.format != "table")
    except KeyboardInterrupt:
        print(
            f"\nstopped following run {run_id}; the run continues in the service.\n"
            f"  re-attach: benchctl follow {run_id}\n"
            f"  cancel it: benchctl cancel {run_id}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    return finish(run, a)


def cmd_follow(a: argparse.Namespace) -> int:
    return follow(_api(a), a.run_id, a)


def add_wait_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=float, default=3600, help="seconds to wait (exit 4)")
    add_outcome_flags(p)


def add_parser(sub: Any) -> None:
    fo = sub.add_parser(
        "follow",
        help="wait for a run already submitted (re-attach): a live table per client while "
        "it measures, then end as run --wait",
    )
    fo.add_argument("run_id", metavar="RUN", type=RUN_ID)
    add_wait_flags(fo)
    fo.add_argument("--format", choices=FORMATS, default="table")
    fo.set_defaults(func=cmd_follow)
