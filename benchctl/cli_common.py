"""What the CLI's commands share: exit codes, output formats, argument helpers and the
API connection."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchctl.client import Api, CliError, resolve_connection
from core.models import ALIAS_PATTERN, RUN_ID_PATTERN, Workload

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_REGRESSION, EXIT_TIMEOUT = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # Ctrl-C: the shell's 128 + SIGINT
TERMINAL = ("completed", "failed", "cancelled")
FORMATS = ["table", "json", "markdown"]
WORKLOAD_FIELDS = list(Workload.model_fields)


def _id_type(pattern: str, what: str) -> Callable[[str], str]:
    """An argparse type for an id: a malformed one is a usage error (exit 2) naming the
    argument, before anything is asked of the API (an id is also a URL path segment)."""

    def check(text: str) -> str:
        if not re.fullmatch(pattern.strip("^$"), text):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return text

    return check


RUN_ID = _id_type(RUN_ID_PATTERN, "a run id (r- and 32 hex digits)")
SCHEDULE_ID = _id_type(r"^sch-[0-9a-f]{16}$", "a schedule id (sch- and 16 hex digits)")
SERIES_KEY = _id_type(r"^[A-Za-z0-9._-]{1,128}$", "a series key (benchctl regressions)")
TARGET_ALIAS = _id_type(ALIAS_PATTERN, "a target alias (lowercase, e.g. scratch)")
REGRESSION_ID = _id_type(r"^[A-Za-z0-9._-]{1,255}$", "a regression id (benchctl regressions)")


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


def read_file(path: str, what: str) -> str:
    """A file the user named, or exit 2 saying which and why (``what``: the flag)."""
    try:
        return Path(path).read_text()
    except UnicodeDecodeError:
        raise CliError(f"{what} {path}: not UTF-8 text", EXIT_BAD_INPUT) from None
    except OSError as e:
        raise CliError(f"{what} {path}: {e.strerror or e}", EXIT_BAD_INPUT) from None


def read_json_object(path: str, what: str) -> dict[str, Any]:
    """A JSON object from a file the user named, or exit 2 saying why."""
    text = read_file(path, what)
    try:
        data = json.loads(text)
    except ValueError as e:
        raise CliError(f"{what} {path}: not JSON ({e})", EXIT_BAD_INPUT) from None
    if not isinstance(data, dict):
        raise CliError(f"{what} {path}: expected a JSON object", EXIT_BAD_INPUT)
    return data
