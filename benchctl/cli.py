"""benchctl: submit and follow benchmark runs, compare them, and manage the local stack.

Exit codes: 0 ok, 1 run failed or cancelled (or refused: target busy), 2 bad input (or not
signed in / not allowed), 3 the run regressed against its series (with
--fail-on-regression), 4 timed out waiting.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
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
from benchctl import cli_reports, localstack
from benchctl.client import Api, ApiUnavailable, CliError, resolve_connection
from benchctl.local_space import local_space_problem
from benchctl.local_targets import TargetDeclarationError, local_registry
from benchctl.render import (
    aggregate_table,
    compare_markdown,
    compare_table,
    console_for_stdout,
    latency_table,
    print_aggregate_notes,
    print_run,
    profiles_table,
    run_markdown,
    scaleout_table,
)
from benchctl.render_fleet import print_agents
from benchctl.render_lists import curves_markdown, headline, list_table
from core.analysis.changepoint import DEFAULT_MIN_MAGNITUDE_PCT, detect_csv
from core.analysis.concurrency import shape_for
from core.analysis.offline import ClientLogs, InputError, aggregate_files
from core.catalogue import PROFILES
from core.errors import ValidationFailed
from core.models import RunRequest, Workload
from core.runs.plan import outstanding_for
from core.validation import validate

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_REGRESSION, EXIT_TIMEOUT = 0, 1, 2, 3, 4
TERMINAL = ("completed", "failed", "cancelled")
FORMATS = ["table", "json", "markdown"]
WORKLOAD_FIELDS = list(Workload.model_fields)


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out = {}
    for v in values:
        k, sep, val = v.partition("=")
        if not sep or not k:
            raise CliError(f"{flag} {v!r}: expected KEY=VALUE", EXIT_BAD_INPUT)
        out[k] = val
    return out


def _ints(text: str, flag: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise CliError(
            f"{flag} {text!r}: expected whole numbers, e.g. 1,2,4", EXIT_BAD_INPUT
        ) from None


def _api(a: argparse.Namespace) -> Api:
    return Api(
        resolve_connection(api_url=a.api_url, api_key=a.api_key, scope=a.scope, config=a.config)
    )


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


def cmd_run(a: argparse.Namespace) -> int:
    body = build_request(a)
    api = _api(a)
    problem = local_space_problem(body, api.base_url)
    if problem:
        raise CliError(f"invalid request:\n  {problem}", EXIT_BAD_INPUT)
    created = api.submit(body, a.idempotency_key)
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


def cmd_profiles(a: argparse.Namespace) -> int:
    profiles = _api(a).profiles() if a.remote else [p.describe() for p in PROFILES]
    if a.format == "json":
        print(json.dumps(profiles, indent=2))
    else:
        console_for_stdout().print(profiles_table(profiles))
    return EXIT_OK


def cmd_plan(a: argparse.Namespace) -> int:
    """Little's law sizing: outstanding I/Os = IOPS x latency, split over clients."""
    if a.latency_ms <= 0 or a.iops <= 0 or min(a.clients, a.mounts, a.files_per_target) < 1:
        raise CliError(
            "--latency-ms and --iops must be positive; --clients, --mounts and "
            "--files-per-target at least 1",
            EXIT_BAD_INPUT,
        )
    outstanding = outstanding_for(a.iops, a.latency_ms / 1000)
    shape = shape_for(
        outstanding,
        a.clients,
        engine=a.engine,
        ioengine=a.ioengine,
        mounts=a.mounts,
        files_per_target=a.files_per_target,
    )
    result = {
        "latency_ms": a.latency_ms,
        "iops": a.iops,
        "outstanding_exact": a.iops * a.latency_ms / 1000,
        "outstanding": outstanding,
        "clients": a.clients,
        "mounts": a.mounts,
        "per_client": shape,
    }
    if a.format == "json":
        print(json.dumps(result, indent=2))
    else:
        print(
            f"{a.latency_ms} ms x {a.iops:g} IOPS = {result['outstanding_exact']:.2f} I/Os in "
            f"flight -> {outstanding} outstanding"
        )
        where = f"per mount ({a.mounts})" if a.mounts > 1 else "per client"
        if a.engine == "diskspd":
            where = f"per file ({a.files_per_target} on each of {a.mounts} mount(s))"
        print(
            f"{where}, on each of {a.clients} client(s): numjobs={shape['numjobs']} x "
            f"iodepth={shape['iodepth']} ({a.engine if a.engine == 'diskspd' else a.ioengine})"
        )
    return EXIT_OK


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


def cmd_aggregate(a: argparse.Namespace) -> int:
    inputs = []
    for name in a.files:
        path = Path(name)
        try:
            text = path.read_text()
        except OSError as e:
            raise CliError(f"{name}: {e.strerror}", EXIT_BAD_INPUT) from None
        logs = None
        if a.logs:  # one directory per client: its fio JSON beside its 1 s logs
            iops = [p.read_text() for p in sorted(path.parent.glob("*_iops.*log"))]
            bw = [p.read_text() for p in sorted(path.parent.glob("*_bw.*log"))]
            hist = [p.read_text() for p in sorted(path.parent.glob("*_clat_hist.*log"))]
            logs = ClientLogs(iops, bw, hist) if iops or bw else None
        inputs.append((name, text, logs))
    try:
        agg = aggregate_files(inputs)
    except InputError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from None
    if a.format == "json":
        print(json.dumps(agg, indent=2))
    else:
        console = console_for_stdout()
        console.print(aggregate_table(agg))
        print_aggregate_notes(agg, console)
    return EXIT_OK


def cmd_detect(a: argparse.Namespace) -> int:
    """Change points in one series (CSV: timestamp,value), E-divisive means."""
    if not (math.isfinite(a.min_magnitude) and a.min_magnitude >= 0):
        message = f"--min-magnitude: {a.min_magnitude:g} is not a percentage >= 0"
        raise CliError(message, EXIT_BAD_INPUT)
    try:
        text = Path(a.file).read_text()
    except OSError as e:
        raise CliError(f"{a.file}: {e.strerror}", EXIT_BAD_INPUT) from None
    higher = True if a.higher_is_better else False if a.lower_is_better else None
    try:
        found = detect_csv(
            text, higher_is_better=higher, pvalue=a.pvalue, min_magnitude_pct=a.min_magnitude
        )
    except ValueError as e:
        raise CliError(f"{a.file}: {e}", EXIT_BAD_INPUT) from None
    if a.format == "json":
        print(json.dumps(found))
    else:
        for cp in found["change_points"]:
            kind = f" {cp['kind']}" if "kind" in cp else ""
            print(
                f"row {cp['index']} ({cp['timestamp']}): {cp['before']:.6g} -> "
                f"{cp['after']:.6g} ({cp['change_pct']:+.1f}%), p={cp['pvalue']:.2g}{kind}"
            )
        if not found["change_points"]:
            print("no change point")
    # Without a direction every change counts: the CLI cannot tell better from worse.
    worse = [cp for cp in found["change_points"] if cp.get("kind", "regression") == "regression"]
    return EXIT_REGRESSION if worse else EXIT_OK


def cmd_schedule(a: argparse.Namespace) -> int:
    api = _api(a)
    if a.schedule_cmd == "create":
        try:
            template = json.loads(Path(a.request).read_text())
        except (OSError, ValueError) as e:
            raise CliError(f"--request {a.request}: {e}", EXIT_BAD_INPUT) from None
        body = {"cron": a.cron, "owner": a.owner, "request": template, "enabled": not a.disabled}
        if a.name:
            body["name"] = a.name
        out = api.schedules("POST", body=body)
    elif a.schedule_cmd == "list":
        out = api.schedules("GET")
    elif a.schedule_cmd == "show":
        out = api.schedules("GET", f"/{a.id}")
    elif a.schedule_cmd in ("enable", "disable"):
        out = api.schedules("PATCH", f"/{a.id}", {"enabled": a.schedule_cmd == "enable"})
    else:
        api.schedules("DELETE", f"/{a.id}")
        out = {"deleted": a.id}
    print(json.dumps(out, indent=2))
    return EXIT_OK


def cmd_local(a: argparse.Namespace) -> int:
    if a.local_cmd == "up":
        targets = _pairs(a.target, "--target")
        if not targets:
            raise CliError("give at least one --target NAME=DIR", EXIT_BAD_INPUT)
        try:
            registry = local_registry(targets, a.target_limits, a.target_facts)
        except TargetDeclarationError as e:
            raise CliError(str(e), EXIT_BAD_INPUT) from None
        localstack.ensure_installed()
        stack = localstack.up(
            agents=a.agents,
            targets=targets,
            visibility_timeout=a.visibility_timeout,
            fresh=a.fresh,
            api_env={"BENCH_TARGETS": registry},
            max_agents=a.max_agents,
            idle_s=a.idle,
            price=a.price,
        )
        print(
            f"local stack up: API {stack.api_url}, {a.agents} agent(s), "
            f"targets {', '.join(f'{k}={v}' for k, v in stack.targets.items())}"
        )
        print(_data_line(stack.dir, "started empty" if a.fresh else "kept from before"))
        return EXIT_OK
    if a.local_cmd == "down":
        stopped = localstack.down()
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        return EXIT_OK
    current = localstack.Stack.load()
    if current is None:
        print("local stack: not running")
        print(_data_line(str(localstack.state_dir()), "kept for the next `up`"))
        return EXIT_OK
    print(f"local stack in {current.dir}: API {current.api_url}")
    for p in current.procs:
        port = f" port {p.port}" if p.port else ""
        print(f"  {p.name:<12} pid {p.pid:<7} {'running' if p.alive() else 'stopped'}{port}")
    print(_data_line(current.dir, "kept across `down`/`up`; `up --fresh` starts empty"))
    return EXIT_OK


def _data_line(directory: str, note: str) -> str:
    dirs = ", ".join(str(Path(directory) / name) for name in localstack.DATA_DIRS)
    return f"data: {dirs} ({note})"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="benchctl", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--api-url", help="service URL (default: $BENCH_API_URL, the config file, the local stack)"
    )
    p.add_argument("--api-key", help="API key (local use; default: $BENCH_API_KEY)")
    p.add_argument(
        "--scope",
        help="Entra ID scope of the API, e.g. api://<client-id>/.default: sign in with "
        "azure-identity (default: $BENCH_API_SCOPE)",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="TOML with api_url, api_key, scope (default: $BENCHCTL_CONFIG or "
        "~/.config/benchctl/config.toml)",
    )
    sub = p.add_subparsers(dest="cmd", required=True)

    run = sub.add_parser("run", help="submit a run (and wait for it)")
    run.add_argument("--request", metavar="FILE", help="JSON run request to start from")
    run.add_argument("--target", help="mount alias, e.g. scratch")
    run.add_argument("--pool")
    run.add_argument("--engine")
    run.add_argument("--clients", help="N, or a sweep such as 1,2,4,8")
    run.add_argument("--profile", help="a catalogue profile (benchctl profiles)")
    run.add_argument(
        "--fill",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write the working set first (default: the profile's)",
    )
    run.add_argument("--sweep", metavar="FIELD=V1,V2", help="sweep iodepth, numjobs or bs")
    run.add_argument("--rate-sweep", metavar="PCT,PCT", help="latency curve: 10,20,...,100")
    run.add_argument("--target-iops", type=int, dest="target_iops")
    run.add_argument("--rate-iops", type=int, dest="rate_iops", help="cap each client's IOPS")
    run.add_argument("--repetitions", type=int)
    run.add_argument("--discard-first", action="store_true", help="first repetition is warm-up")
    run.add_argument("--rw")
    run.add_argument("--bs")
    run.add_argument("--iodepth", type=int)
    run.add_argument("--numjobs", type=int)
    run.add_argument("--rwmixread", type=int)
    run.add_argument("--size")
    run.add_argument("--runtime", type=int, help="measured seconds")
    run.add_argument("--ramp-time", type=int, dest="ramp_time", help="warm-up seconds")
    run.add_argument("--direct", action=argparse.BooleanOptionalAction, default=None)
    run.add_argument("--ioengine")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a workload field, e.g. --set iodepth=32 --set bs=64k",
    )
    run.add_argument(
        "--on-busy",
        choices=["wait", "refuse"],
        help="when another run holds the target: wait in line (default) or refuse",
    )
    run.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE")
    run.add_argument("--idempotency-key")
    run.add_argument("--wait", action="store_true", help="follow the run and print results")
    run.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="with --wait: exit 3 when the run regressed against its series",
    )
    run.add_argument("--timeout", type=float, default=3600, help="seconds to wait (exit 4)")
    run.add_argument("--format", choices=FORMATS, default="table")
    run.set_defaults(func=cmd_run)

    st = sub.add_parser("status", help="show a run")
    st.add_argument("run_id")
    st.add_argument("--format", choices=FORMATS, default="table")
    st.set_defaults(func=cmd_status)

    sh = sub.add_parser("show", help="show a run, or its curves")
    sh.add_argument("run_id")
    sh.add_argument("--curve", action="store_true", help="latency-vs-IOPS and scale-out curves")
    sh.add_argument("--format", choices=FORMATS, default="table")
    sh.set_defaults(func=cmd_show)

    ag = sub.add_parser("agents", help="the agents the service knows, and its pools")
    ag.add_argument("--pool")
    ag.add_argument("--format", choices=("table", "json"), default="table")
    ag.set_defaults(func=cmd_agents)

    cp = sub.add_parser("compare", help="two runs side by side, against the series' noise")
    cp.add_argument("run_a", metavar="RUN_A")
    cp.add_argument("run_b", metavar="RUN_B")
    cp.add_argument(
        "--fail-on-worse", action="store_true", help="exit 3 when B is worse beyond the noise"
    )
    cp.add_argument("--format", choices=FORMATS, default="table")
    cp.set_defaults(func=cmd_compare)

    pr = sub.add_parser("profiles", help="the workload catalogue")
    pr.add_argument("--remote", action="store_true", help="ask the API instead of this copy")
    pr.add_argument("--format", choices=["table", "json"], default="table")
    pr.set_defaults(func=cmd_profiles)

    pl = sub.add_parser("plan", help="size outstanding I/Os by Little's law")
    pl.add_argument("--latency-ms", type=float, required=True, help="1-thread latency, ms")
    pl.add_argument("--iops", type=float, required=True, help="the IOPS to reach")
    pl.add_argument("--clients", type=int, default=1)
    pl.add_argument("--mounts", type=int, default=1, help="mounts each client loads")
    pl.add_argument("--engine", choices=["fio", "diskspd"], default="fio")
    pl.add_argument("--files-per-target", type=int, default=1, help="DiskSpd files per mount")
    pl.add_argument("--ioengine", default="libaio")
    pl.add_argument("--format", choices=["table", "json"], default="table")
    pl.set_defaults(func=cmd_plan)

    ls = sub.add_parser("list", help="list runs")
    ls.add_argument("--target")
    ls.add_argument("--state")
    ls.add_argument("--tag", metavar="KEY=VALUE")
    ls.add_argument("--limit", type=int, default=20)
    ls.add_argument("--format", choices=["table", "json"], default="table")
    ls.set_defaults(func=cmd_list)

    ca = sub.add_parser("cancel", help="cancel a run")
    ca.add_argument("run_id")
    ca.set_defaults(func=cmd_cancel)

    ag = sub.add_parser("aggregate", help="aggregate fio JSON outputs offline")
    ag.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="fio JSON outputs: one per client, or one client/server output",
    )
    ag.add_argument(
        "--logs",
        action="store_true",
        help="read *_iops.*.log / *_bw.*.log beside each file (one dir per client)",
    )
    ag.add_argument("--format", choices=["table", "json"], default="table")
    ag.set_defaults(func=cmd_aggregate)

    sc = sub.add_parser("schedule", help="scheduled runs (cron, UTC)")
    scsub = sc.add_subparsers(dest="schedule_cmd", required=True)
    scc = scsub.add_parser("create")
    scc.add_argument("--cron", required=True, help="5-field cron, UTC, e.g. '0 3 * * *'")
    scc.add_argument("--owner", required=True)
    scc.add_argument("--request", required=True, metavar="FILE", help="run request template")
    scc.add_argument("--name")
    scc.add_argument("--disabled", action="store_true")
    scsub.add_parser("list")
    for verb in ("show", "enable", "disable", "delete"):
        scsub.add_parser(verb).add_argument("id")
    sc.set_defaults(func=cmd_schedule)

    de = sub.add_parser("detect", help="change points in a CSV series (timestamp,value)")
    de.add_argument("file", metavar="FILE.csv")
    direction = de.add_mutually_exclusive_group()
    direction.add_argument("--higher-is-better", action="store_true", help="IOPS, bandwidth")
    direction.add_argument("--lower-is-better", action="store_true", help="latency")
    de.add_argument("--pvalue", type=float, default=0.001)
    de.add_argument(
        "--min-magnitude",
        type=float,
        default=DEFAULT_MIN_MAGNITUDE_PCT,
        metavar="PCT",
        help=f"smallest change worth reporting, percent (default {DEFAULT_MIN_MAGNITUDE_PCT:g})",
    )
    de.add_argument("--format", choices=["table", "json"], default="table")
    de.set_defaults(func=cmd_detect)

    cli_reports.add_parsers(sub)

    lo = sub.add_parser("local", help="the local stack (emulators, API, agents)")
    losub = lo.add_subparsers(dest="local_cmd", required=True)
    lu = losub.add_parser("up")
    lu.add_argument("--agents", type=int, default=2)
    lu.add_argument("--target", action="append", default=[], metavar="NAME=DIR")
    lu.add_argument(
        "--target-limits",
        action="append",
        default=[],
        metavar="NAME=KEY=N[,KEY=N]",
        help="declared limits of a target: read_mibps, write_mibps, total_mibps, iops",
    )
    lu.add_argument(
        "--target-facts",
        action="append",
        default=[],
        metavar="NAME=JSON",
        help='what a target is, e.g. vol1=\'{"kind": "anf", "service_level": "ultra", '
        '"quota_tib": 100}\'',
    )
    lu.add_argument("--visibility-timeout", type=int, default=30)
    lu.add_argument(
        "--max-agents",
        type=int,
        help="make the pool elastic: start agents up to this many when runs need them, "
        "stop them back down to --agents when idle",
    )
    lu.add_argument(
        "--idle", type=float, default=900, help="seconds idle before an elastic pool shrinks"
    )
    lu.add_argument("--price", type=float, help="hourly price of a client VM, for usage costs")
    lu.add_argument(
        "--fresh",
        action="store_true",
        help="start empty: remove the runs, results, schedules, series and queued messages kept",
    )
    losub.add_parser("down")
    losub.add_parser("status")
    lo.set_defaults(func=cmd_local)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if hasattr(args, "api_func"):
            code: int = args.api_func(args, _api(args))
        else:
            code = args.func(args)
        sys.stdout.flush()  # here, where a closed pipe can still be caught
    except BrokenPipeError:
        # The reader went away (`benchctl list | head`): end quietly (exit 1, Python's
        # convention for EPIPE and rich's), and keep the flush at exit from complaining.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except CliError as e:
        print(f"benchctl: {e}", file=sys.stderr)
        return e.code
    except localstack.StackError as e:
        print(f"benchctl: {e}", file=sys.stderr)
        return EXIT_FAILED
    return code


if __name__ == "__main__":
    sys.exit(main())
