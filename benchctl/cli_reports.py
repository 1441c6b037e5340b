"""benchctl report (HTML) and export (CSV): files a person or a pipeline keeps."""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path
from typing import Any

from benchctl.cli_common import RUN_ID, SERIES_KEY
from benchctl.client import Api, CliError

EXIT_OK, EXIT_BAD_INPUT = 0, 2
MAX_COMPARED = 6  # as the API takes (reports.compare)
SECOND_COLUMNS = ["run_id", "step", "client", "agent_id", "direction", "t_ms", "iops", "bw_bytes"]
STEP_COLUMNS = ["run_id", "step", "point", "clients", "direction", "iops", "bw_bytes"]
# Latency columns name their kind (the docs, "Which latency"): total, then completion.
LATENCY_COLUMNS = [f"{k}_{p}_ns" for k in ("lat", "clat") for p in ("p50", "p99", "p99.9")]
STEP_COLUMNS += [*LATENCY_COLUMNS, "lat_mean_ns", "slat_mean_ns", "clat_mean_ns"]
STEP_COLUMNS += ["basis", "window_s", "partial"]


def _write(text: str, output: str | None) -> None:
    if output and output != "-":
        try:
            Path(output).write_text(text)
        except OSError as e:
            raise CliError(f"-o {output}: {e.strerror}", EXIT_BAD_INPUT) from None
        print(f"wrote {output} ({len(text.encode()):,} bytes)", file=sys.stderr)
    else:
        sys.stdout.write(text)


def cmd_report(a: argparse.Namespace, api: Api) -> int:
    if sum(map(bool, (a.run_id, a.series, a.compare))) != 1:
        raise CliError("give a RUN, --series KEY or --compare RUN RUN … (one)", EXIT_BAD_INPUT)
    if a.compare:
        if not 2 <= len(a.compare) <= MAX_COMPARED:
            raise CliError(f"--compare: 2 to {MAX_COMPARED} runs", EXIT_BAD_INPUT)
        html = api.compare_report(a.compare)
    else:
        html = api.series_report(a.series) if a.series else api.run_report(a.run_id)
    _write(html, a.output)
    return EXIT_OK


def number(v: Any) -> Any:
    """A figure as people write it: a whole number without decimals, else at most three
    (per-second rates from 1 s log lines: 32665.000000000004 is 32665)."""
    if not isinstance(v, float):
        return v
    rounded = round(v, 3)
    if rounded == int(rounded):
        return int(rounded)
    return f"{rounded:.3f}".rstrip("0")


def seconds_rows(api: Api, run: dict[str, Any]) -> list[list[Any]]:
    """Each client's IOPS and bytes/s per second of its step's common window (the same
    seconds for every client of the step); a step without one, each client's own period."""
    rows = []
    for item in run["items"]:
        if not item.get("result"):
            continue
        full = api.result(run["id"], item["id"], window="common")
        for d, points in sorted((full.get("series") or {}).items()):
            for p in points:
                who = [run["id"], item["step"], item["client"], item.get("agent_id"), d]
                rows.append([*who, int(p["t_ms"]), number(p["iops"]), number(p["bw_bytes"])])
    return rows


def step_rows(run: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for s in run["steps"]:
        agg = s.get("aggregate")
        if not agg:
            continue
        window = (agg.get("window") or {}).get("seconds")
        for d in ("read", "write"):
            a = agg.get(d)
            if a:
                which = [run["id"], s["step"], s.get("point") or "", agg["clients"], d]
                latency = [
                    (a.get(f"{k}_ns") or {}).get(p)
                    for k in ("lat", "clat")
                    for p in ("p50", "p99", "p99.9")
                ]
                means = [a.get(f"{k}_mean_ns") for k in ("lat", "slat", "clat")]
                figures = [a["iops"], a["bw_bytes"], *latency, *means]
                basis, partial = agg.get("basis"), bool(agg.get("partial"))
                rows.append([*which, *map(number, figures), basis, number(window), partial])
    return rows


def cmd_export(a: argparse.Namespace, api: Api) -> int:
    run = api.get(a.run_id)
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    if a.by == "second":
        out.writerow(SECOND_COLUMNS)
        out.writerows(seconds_rows(api, run))
    else:
        out.writerow(STEP_COLUMNS)
        out.writerows(step_rows(run))
    _write(buf.getvalue(), a.output)
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    rp = sub.add_parser("report", help="a run's or a series' report: one self-contained HTML")
    rp.add_argument("run_id", nargs="?", metavar="RUN", type=RUN_ID)
    rp.add_argument(
        "--series", metavar="KEY", type=SERIES_KEY, help="a series' report instead of a run's"
    )
    rp.add_argument(
        "--compare",
        nargs="+",
        metavar="RUN",
        type=RUN_ID,
        help="runs compared: A B [C …], overlaid, with deltas against A and its noise",
    )
    rp.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    rp.set_defaults(api_func=cmd_report)

    ex = sub.add_parser("export", help="a run's figures as CSV")
    ex.add_argument("run_id", metavar="RUN", type=RUN_ID)
    ex.add_argument("--format", choices=["csv"], default="csv")
    ex.add_argument(
        "--by",
        choices=["second", "step"],
        default="second",
        help="second: each client's IOPS and bytes/s per second; step: each step's aggregate",
    )
    ex.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    ex.set_defaults(api_func=cmd_export)
