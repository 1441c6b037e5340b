"""benchctl's commands on runs: submit and follow one, show, list, compare, cancel; the
agents that run them."""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
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
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_TIMEOUT,
    TERMINAL,
    WORKLOAD_FIELDS,
    _api,
    _ints,
    _pairs,
)
from benchctl.client import Api, ApiUnavailable, CliError
from benchctl.local_space import local_space_problem
from benchctl.render import (
    compare_markdown,
    compare_table,
    console_for_stdout,
    latency_table,
    print_run,
    run_markdown,
    scaleout_table,
)
from benchctl.render_fleet import print_agents
from benchctl.render_lists import curves_markdown, headline, list_table
from core.errors import ValidationFailed
from core.models import RunRequest
from core.validation import validate


def build_request(a: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(Path(a.request).read_text()) if a.request else {}
    for key in ("target", "pool", "engine", "profile", "fill", "repetitions", "target_iops"):
        if getattr(a, key, None) is not None:
            body[key] = getattr(a, key)
    if a.discard_first:
        body["discard_first"] = True
    if a.clients is not None:
        counts = _ints(a.clients, "--clients")
        body["clients"] = counts[0] if len(counts) == 1 else counts
    if a.sweep:
        name, sep, values = a.sweep.partition("=")
        if not sep or not values:
            raise CliError("--sweep: expected FIELD=V1,V2,...", EXIT_BAD_INPUT)
        items: list[int | str] = [
            int(v) if v.isdigit() and name != "bs" else v for v in values.split(",")
        ]
        body["sweep"] = {"field": name, "values": items}
    if a.rate_sweep:
        body["sweep"] = {"rate_pct": _ints(a.rate_sweep, "--rate-sweep")}
    if a.on_busy:
        body["on_busy"] = a.on_busy
    workload = dict(body.get("workload", {}))
    for key, text in _pairs(a.set, "--set").items():
        try:  # numbers and booleans as JSON; anything else (4k, randread) as text
            workload[key] = json.loads(text)
        except ValueError:
            workload[key] = text
    for name in WORKLOAD_FIELDS:
        value = getattr(a, name, None)
        if value is not None:
            workload[name] = value
    if workload:
        body["workload"] = workload
    if a.tag:
        body["tags"] = {**body.get("tags", {}), **_pairs(a.tag, "--tag")}
    # Check here first: a typo is reported without a round trip, naming the field.
    try:
        validate("run-request", body, RunRequest)
    except ValidationFailed as e:
        lines = "\n".join(f"  {x.field}: {x.message}" for x in e.errors)
        raise CliError(f"invalid request:\n{lines}", EXIT_BAD_INPUT) from None
    return body


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
    """Follow a run with one progress bar per step and client (on stderr)."""
    deadline = time.monotonic() + timeout_s
    console = Console(stderr=True)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=True,
    ) as progress:
        tasks: dict[str, Any] = {}
        while True:
            run = _poll(api, run_id, deadline, timeout_s, console)
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
                    f"run {run_id} still {run['state']} after {timeout_s:.0f} s", EXIT_TIMEOUT
                )
            time.sleep(1.0)


SUBMIT_BUDGET_S = 60.0  # retrying a submission that got no answer, a timeout or a 5xx


def _submit(api: Api, body: dict[str, Any], key: str) -> dict[str, Any]:
    """Submit with an Idempotency-Key (the caller's, or one made here), retried through
    5xx answers and timeouts with the same key: a retry returns the run a lost answer
    made, never a second one (a 503 made none: core.runs.commit)."""
    console = Console(stderr=True)

    def note(state: Any) -> None:
        console.print(f"[yellow]{state.outcome.exception()}; retrying[/yellow]")

    retry = retrying(ApiUnavailable, budget_s=SUBMIT_BUDGET_S, max_wait_s=5, before_sleep=note)
    try:
        return retry(lambda: api.submit(body, key))
    except ApiUnavailable as e:
        raise CliError(
            f"no run submitted within {SUBMIT_BUDGET_S:.0f} s: {e} "
            f"(retry with --idempotency-key {key}: it makes the run at most once)"
        ) from e


def cmd_run(a: argparse.Namespace) -> int:
    body = build_request(a)
    api = _api(a)
    problem = local_space_problem(body, api.base_url)
    if problem:
        raise CliError(f"invalid request:\n  {problem}", EXIT_BAD_INPUT)
    created = _submit(api, body, a.idempotency_key or f"benchctl-{uuid.uuid4().hex}")
    run_id = created["id"]
    if not a.wait:
        print(json.dumps(created) if a.format == "json" else run_id)
        return EXIT_OK
    if a.format != "json":
        print(f"run {run_id} submitted", file=sys.stderr)
    run = wait_for(api, run_id, timeout_s=a.timeout, quiet=a.format != "table")
    found = []
    if run["state"] == "completed":
        found = [
            r
            for r in api.regressions()
            if r["first_run_id"] == run_id and r["kind"] == "regression"
        ]
    code = _show(run, a.format, found)
    for r in found:
        print(
            f"regression: {r['metric']} {r['change_pct']:+.1f}% ({r['method']}) vs series "
            f"{r['series_key']}",
            file=sys.stderr,
        )
    if code == EXIT_OK and found and a.fail_on_regression:
        return EXIT_REGRESSION
    return code


def _show(run: dict[str, Any], fmt: str, regressions: list[dict[str, Any]] | None = None) -> int:
    if fmt == "json":
        print(
            json.dumps(
                run if regressions is None else {**run, "regressions": regressions}, indent=2
            )
        )
    elif fmt == "markdown":
        print(run_markdown(run, regressions), end="")
    else:
        print_run(run)
    return EXIT_OK if run["state"] == "completed" else EXIT_FAILED


def cmd_status(a: argparse.Namespace) -> int:
    run = _api(a).get(a.run_id)
    return _show(run, a.format)


def cmd_show(a: argparse.Namespace) -> int:
    api = _api(a)
    if not a.curve:
        return _show(api.get(a.run_id), a.format)
    curves = api.curves(a.run_id)
    if a.format == "json":
        print(json.dumps(curves, indent=2))
    elif a.format == "markdown":
        print(curves_markdown(curves), end="")
    else:
        console_for_stdout().print(latency_table(curves), scaleout_table(curves))
    return EXIT_OK


def cmd_agents(a: argparse.Namespace) -> int:
    """The agent registry and the pools: sizes, live agents, client VM time and cost."""
    view = _api(a).agents(a.pool)
    if a.format == "json":
        print(json.dumps(view, indent=2))
    else:
        print_agents(view, console_for_stdout())
    return EXIT_OK


def cmd_compare(a: argparse.Namespace) -> int:
    """Side by side with deltas, each judged against the noise of run A's series."""
    cmp = _api(a).compare(a.run_a, a.run_b)
    unfinished = [f"{k.upper()} {cmp[k]['id']} is {cmp[k]['state']}" for k in ("a", "b")]
    unfinished = [
        u for u, k in zip(unfinished, "ab", strict=True) if cmp[k]["state"] != "completed"
    ]
    if unfinished or not cmp["rows"]:
        why = "; ".join(unfinished) or "a run has no aggregate"
        print(f"benchctl: cannot compare: {why} (only completed runs compare)", file=sys.stderr)
        return EXIT_FAILED
    if a.format == "json":
        print(json.dumps(cmp, indent=2))
    elif a.format == "markdown":
        print(compare_markdown(cmp), end="")
    else:
        console = console_for_stdout()
        console.print(compare_table(cmp))
        console.print(cmp["summary"])
        if not cmp["comparable"]:
            console.print("[yellow]careful: the runs differ in workload, targets or clients")
    worse = any(r["verdict"] == "worse" for r in cmp["rows"])
    return EXIT_REGRESSION if worse and a.fail_on_worse else EXIT_OK


def cmd_list(a: argparse.Namespace) -> int:
    api = _api(a)
    data = api.list(target=a.target, state=a.state, tag=a.tag, limit=a.limit)
    for r in data["runs"]:  # the listing has no figures: each run's view has
        r["headline"] = headline(api.get(r["id"]))
    if a.format == "json":
        print(json.dumps(data, indent=2))
    else:
        # Piped, wider than other tables: a run id is 34 characters and must not wrap.
        Console(width=None if sys.stdout.isatty() else 160).print(list_table(data["runs"]))
    return EXIT_OK


def cmd_cancel(a: argparse.Namespace) -> int:
    run = _api(a).cancel(a.run_id)
    print(f"{run['id']}: {run['state']}")
    return EXIT_OK
