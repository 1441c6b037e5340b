"""A run as a command ends with it: printed in the asked format, its gate verdict on stderr
and in a JUnit file, and the exit code, which is the run's state and the service's gate
verdict and nothing else (the docs, "Pipelines")."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchctl.cli_common import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, EXIT_REGRESSION
from benchctl.client import CliError
from tables.gate import failures, gate_table, headline, junit_xml
from tables.runs import console_for_stdout, print_run, run_markdown

UNSUCCESSFUL = ("failed", "cancelled")


def exit_code(run: dict[str, Any], *, fail_on_regression: bool) -> int:
    """1 for a failed or cancelled run; 3 for a completed run the gate judged a regression,
    when asked to fail on one; else 0 (a run still going is not a failure)."""
    if run["state"] in UNSUCCESSFUL:
        return EXIT_FAILED
    regressed = run["state"] == "completed" and (run.get("gate") or {}).get("verdict") == (
        "regression"
    )
    return EXIT_REGRESSION if regressed and fail_on_regression else EXIT_OK


def show(run: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        print(json.dumps(run, indent=2))
    elif fmt == "markdown":
        print(run_markdown(run), end="")
    else:
        console = console_for_stdout()
        print_run(run, console)
        if run["state"] == "completed":
            console.print(gate_table(run))


def write_junit(run: dict[str, Any], path: str) -> None:
    try:
        Path(path).write_text(junit_xml(run))
    except OSError as e:
        raise CliError(f"--junit {path}: {e.strerror}", EXIT_BAD_INPUT) from None
    print(f"wrote {path} (JUnit: the gate's verdict per metric)", file=sys.stderr)


def finish(run: dict[str, Any], a: argparse.Namespace) -> int:
    """Print the run, say the gate's verdict, write the JUnit file; the exit code."""
    show(run, a.format)
    if run["state"] == "completed":
        for line in failures(run):
            print(line, file=sys.stderr)
        if a.format != "table":  # the table output has it already
            print(headline(run), file=sys.stderr)
    elif run.get("error"):
        print(f"run {run['id']} {run['state']}: {run['error']}", file=sys.stderr)
    if getattr(a, "junit", None):
        write_junit(run, a.junit)
    return exit_code(run, fail_on_regression=getattr(a, "fail_on_regression", False))


def add_outcome_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 3 when the service's gate judged the run a regression",
    )
    p.add_argument(
        "--junit",
        metavar="FILE",
        help="write the gate's verdict as JUnit XML: one test case per step and metric",
    )
