"""benchctl's commands on runs: submit one (and follow it: benchctl.cli_follow), show,
list, compare, cancel; the agents that run them."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import Any

from rich.console import Console

from apiclient import retrying
from benchctl.cli_common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REGRESSION,
    WORKLOAD_FIELDS,
    _api,
    _ints,
    _pairs,
    read_json_object,
)
from benchctl.cli_follow import follow
from benchctl.client import Api, ApiUnavailable, CliError
from benchctl.local_space import local_space_problem
from benchctl.outcome import exit_code, finish, show
from core.catalogue import get_profile
from core.errors import ValidationFailed
from core.models import RunRequest
from core.validation import parse
from tables.fleet import print_agents
from tables.lists import curves_markdown, headline, list_table
from tables.runs import (
    compare_markdown,
    compare_table,
    console_for_stdout,
    latency_table,
    scaleout_table,
)


def _field_sweep(text: str) -> dict[str, Any]:
    name, sep, values = text.partition("=")
    if not sep or not values:
        raise CliError("--sweep: expected FIELD=V1,V2,...", EXIT_BAD_INPUT)
    items: list[int | str] = [
        int(v) if v.isdigit() and name != "bs" else v for v in values.split(",")
    ]
    return {"field": name, "values": items}


def _sweep(a: argparse.Namespace) -> dict[str, Any] | None:
    sweep = None
    if a.sweep:
        # One --sweep sweeps a field; two cross theirs (a grid, drawn as heatmaps).
        fields = [_field_sweep(text) for text in a.sweep]
        if len(fields) > 2:
            raise CliError("--sweep: at most two fields (a grid)", EXIT_BAD_INPUT)
        sweep = fields[0] if len(fields) == 1 else {"grid": fields}
    if a.rate_sweep:
        sweep = {"rate_pct": _ints(a.rate_sweep, "--rate-sweep")}
    return sweep


def _workload(a: argparse.Namespace, body: dict[str, Any]) -> dict[str, Any]:
    """The request's workload with --set's and the workload options' values over it."""
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
    return workload


def _check_request(body: dict[str, Any]) -> None:
    """As the API would check it: a typo is reported without a round trip, naming the field."""
    try:
        parse(RunRequest, body)
    except ValidationFailed as e:
        lines = "\n".join(f"  {x.field}: {x.message}" for x in e.errors)
        raise CliError(f"invalid request:\n{lines}", EXIT_BAD_INPUT) from None
    if body.get("profile"):
        try:
            get_profile(body["profile"])  # as the API would: 400 naming profile
        except KeyError as e:
            raise CliError(f"invalid request:\n  profile: {e.args[0]}", EXIT_BAD_INPUT) from None


def build_request(a: argparse.Namespace) -> dict[str, Any]:
    body = read_json_object(a.request, "--request") if a.request else {}
    for key in ("target", "pool", "engine", "profile", "fill", "repetitions", "target_iops"):
        if getattr(a, key, None) is not None:
            body[key] = getattr(a, key)
    if a.discard_first:
        body["discard_first"] = True
    if a.clients is not None:
        counts = _ints(a.clients, "--clients")
        body["clients"] = counts[0] if len(counts) == 1 else counts
    sweep = _sweep(a)
    if sweep is not None:
        body["sweep"] = sweep
    if a.on_busy:
        body["on_busy"] = a.on_busy
    workload = _workload(a, body)
    if workload:
        body["workload"] = workload
    if a.tag:
        body["tags"] = {**body.get("tags", {}), **_pairs(a.tag, "--tag")}
    _check_request(body)
    return body


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
    if not a.wait:
        needs = [
            f
            for f, on in (("--fail-on-regression", a.fail_on_regression), ("--junit", a.junit))
            if on
        ]
        if needs:
            raise CliError(
                f"{needs[0]} needs --wait (or: benchctl follow RUN {needs[0]})", EXIT_BAD_INPUT
            )
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
    return follow(api, run_id, a)


def cmd_status(a: argparse.Namespace) -> int:
    """The run as it is now; exit 1 when it failed or was cancelled (3 on a regression
    with --fail-on-regression), 0 otherwise, finished or not."""
    return finish(_api(a).get(a.run_id), a)


def cmd_show(a: argparse.Namespace) -> int:
    api = _api(a)
    if not a.curve:
        run = api.get(a.run_id)
        show(run, a.format)
        return exit_code(run, fail_on_regression=False)
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


def cmd_clean(a: argparse.Namespace) -> int:
    order = _api(a).clean(a.target, a.pool)
    print(
        f"{order['id']}: {order['state']}: the first agent of pool {order['pool']} with "
        f"target {order['target']} removes the benchmark files under .benchsvc/ there"
    )
    return EXIT_OK
