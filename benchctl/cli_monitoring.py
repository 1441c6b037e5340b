"""benchctl's commands for continuous monitoring: schedules, and the regressions found with
their triage (the docs, "Continuous monitoring")."""

from __future__ import annotations

import argparse
import json
from typing import Any

from benchctl.cli_common import (
    EXIT_FAILED,
    EXIT_OK,
    REGRESSION_ID,
    RUN_ID,
    SCHEDULE_ID,
    _api,
    read_json_object,
)
from benchctl.client import CliError
from core.models.regression import TRIAGE_STATES
from tables.monitoring import regressions_table, schedule_card, schedules_table
from tables.runs import console_for_stdout

LIST_FORMATS = ["table", "json"]


def _print(data: Any, fmt: str, table: Any) -> None:
    if fmt == "json":
        print(json.dumps(data, indent=2))
    else:
        console_for_stdout().print(table)


def cmd_schedule(a: argparse.Namespace) -> int:
    template = read_json_object(a.request, "--request") if a.schedule_cmd == "create" else {}
    api = _api(a)
    if a.schedule_cmd == "create":
        body = {"cron": a.cron, "owner": a.owner, "request": template, "enabled": not a.disabled}
        if a.name:
            body["name"] = a.name
        out = api.schedules("POST", body=body)
    elif a.schedule_cmd == "list":
        found = api.schedules("GET")["schedules"]
        _print({"schedules": found}, a.format, schedules_table(found))
        return EXIT_OK
    elif a.schedule_cmd == "show":
        out = api.schedules("GET", f"/{a.id}")
    elif a.schedule_cmd in ("enable", "disable"):
        out = api.schedules("PATCH", f"/{a.id}", {"enabled": a.schedule_cmd == "enable"})
    else:
        api.schedules("DELETE", f"/{a.id}")
        print(json.dumps({"deleted": a.id}) if a.format == "json" else f"deleted {a.id}")
        return EXIT_OK
    _print(out, a.format, schedule_card(out))
    return EXIT_OK


def cmd_regressions(a: argparse.Namespace) -> int:
    found = _api(a).regressions(a.state)
    found = [r for r in found if a.target in (None, r.get("target"))]
    found = [r for r in found if a.run in (None, r["first_run_id"])]
    title = f"regressions ({a.state})" if a.state else "regressions"
    _print({"regressions": found}, a.format, regressions_table(found, title))
    return EXIT_OK


def cmd_triage(a: argparse.Namespace) -> int:
    """Set the triage state of regressions: by id, or every open one first seen on a run
    (expected: the new level is the norm for the gate from that run on)."""
    api = _api(a)
    if bool(a.ids) == bool(a.run):
        raise CliError("give regression ids or --run RUN (one of the two)", 2)
    ids = list(a.ids)
    if a.run:
        ids = [
            r["id"]
            for r in api.regressions()
            if r["first_run_id"] == a.run and r["state"] in ("new", "acknowledged")
        ]
        if not ids:
            print(f"benchctl: no open regression was first seen on run {a.run}")
            return EXIT_FAILED
    done = [api.triage(i.split(".", 1)[0], i, a.state) for i in ids]
    _print({"regressions": done}, a.format, regressions_table(done, f"triaged: {a.state}"))
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    sc = sub.add_parser("schedule", help="scheduled runs (cron, UTC)")
    scsub = sc.add_subparsers(dest="schedule_cmd", required=True)
    scc = scsub.add_parser("create")
    scc.add_argument("--cron", required=True, help="5-field cron, UTC, e.g. '0 3 * * *'")
    scc.add_argument("--owner", required=True)
    scc.add_argument("--request", required=True, metavar="FILE", help="run request template")
    scc.add_argument("--name")
    scc.add_argument("--disabled", action="store_true")
    scc.add_argument("--format", choices=LIST_FORMATS, default="table")
    scsub.add_parser("list").add_argument("--format", choices=LIST_FORMATS, default="table")
    for verb in ("show", "enable", "disable", "delete"):
        v = scsub.add_parser(verb)
        v.add_argument("id", metavar="ID", type=SCHEDULE_ID)
        v.add_argument("--format", choices=LIST_FORMATS, default="table")
    sc.set_defaults(func=cmd_schedule)

    rg = sub.add_parser("regressions", help="the regressions and improvements found")
    rg.add_argument("--state", choices=TRIAGE_STATES, help="only those in this triage state")
    rg.add_argument("--target", help="only this target's")
    rg.add_argument("--run", type=RUN_ID, metavar="RUN", help="only those first seen on RUN")
    rg.add_argument("--format", choices=LIST_FORMATS, default="table")
    rg.set_defaults(func=cmd_regressions)

    tr = sub.add_parser(
        "triage", help="set regressions' triage state (expected: the new level is the norm)"
    )
    tr.add_argument("ids", nargs="*", metavar="ID", type=REGRESSION_ID)
    tr.add_argument("--run", type=RUN_ID, metavar="RUN", help="every open one first seen on RUN")
    tr.add_argument("--state", required=True, choices=TRIAGE_STATES[1:])
    tr.add_argument("--format", choices=LIST_FORMATS, default="table")
    tr.set_defaults(func=cmd_triage)
