"""What the CLI's commands share: exit codes, output formats, argument helpers and the
API connection."""

from __future__ import annotations

import argparse

from benchctl.client import Api, CliError, resolve_connection
from core.models import Workload

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_REGRESSION, EXIT_TIMEOUT = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # Ctrl-C: the shell's 128 + SIGINT
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
