"""benchctl: submit and follow benchmark runs, compare them, and manage the local stack.

Exit codes: 0 ok, 1 run failed or cancelled (or refused: target busy), 2 bad input (or not
signed in / not allowed), 3 the run regressed against its series (with
--fail-on-regression), 4 timed out waiting.
"""

from __future__ import annotations

import argparse
import os
import sys

from benchctl import cli_admin, cli_follow, cli_monitoring, cli_reports
from benchctl.cli_common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    FORMATS,
    RUN_ID,
    TARGET_ALIAS,
    _api,
)
from benchctl.cli_runs import (
    cmd_agents,
    cmd_cancel,
    cmd_clean,
    cmd_compare,
    cmd_list,
    cmd_run,
    cmd_show,
    cmd_status,
)
from benchctl.cli_tools import (
    cmd_aggregate,
    cmd_detect,
    cmd_local,
    cmd_plan,
    cmd_profiles,
)
from benchctl.client import CliError
from benchctl.local_state import StackError
from benchctl.outcome import add_outcome_flags
from core.analysis.magnitude import DEFAULT_MIN_MAGNITUDE_PCT


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
    run.add_argument(
        "--sweep",
        metavar="FIELD=V1,V2",
        action="append",
        help="sweep iodepth, numjobs or bs; twice to cross two fields (a grid)",
    )
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
    run.add_argument(
        "--idempotency-key",
        help="the run's key: the same key and request make one run (default: a new key, "
        "kept through this command's retries)",
    )
    run.add_argument("--wait", action="store_true", help="follow the run and print results")
    cli_follow.add_wait_flags(run)
    run.add_argument("--format", choices=FORMATS, default="table")
    run.set_defaults(func=cmd_run)

    cli_follow.add_parser(sub)

    st = sub.add_parser("status", help="show a run (exit 1 when it failed or was cancelled)")
    st.add_argument("run_id", metavar="RUN", type=RUN_ID)
    add_outcome_flags(st)
    st.add_argument("--format", choices=FORMATS, default="table")
    st.set_defaults(func=cmd_status)

    sh = sub.add_parser("show", help="show a run, or its curves")
    sh.add_argument("run_id", metavar="RUN", type=RUN_ID)
    sh.add_argument("--curve", action="store_true", help="latency-vs-IOPS and scale-out curves")
    sh.add_argument("--format", choices=FORMATS, default="table")
    sh.set_defaults(func=cmd_show)

    ag = sub.add_parser("agents", help="the agents the service knows, and its pools")
    ag.add_argument("--pool")
    ag.add_argument("--format", choices=("table", "json"), default="table")
    ag.set_defaults(func=cmd_agents)

    cp = sub.add_parser("compare", help="two runs side by side, against the series' noise")
    cp.add_argument("run_a", metavar="RUN_A", type=RUN_ID)
    cp.add_argument("run_b", metavar="RUN_B", type=RUN_ID)
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
    ca.add_argument("run_id", metavar="RUN", type=RUN_ID)
    ca.set_defaults(func=cmd_cancel)

    cl = sub.add_parser("clean", help="have an agent remove a target's benchmark files")
    cl.add_argument("target", type=TARGET_ALIAS)
    cl.add_argument("--pool", help="the target's pool, when several pools have it")
    cl.set_defaults(func=cmd_clean)

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

    cli_monitoring.add_parsers(sub)

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
    cli_admin.add_parsers(sub)

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
        "--api-instances",
        type=int,
        default=1,
        metavar="N",
        help="run N API processes behind nginx on the API port (timers on one at a time)",
    )
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
        "--create", action="store_true", help="create target directories that do not exist"
    )
    lu.add_argument(
        "--fresh",
        action="store_true",
        help="start empty: remove the runs, results, schedules, series and queued messages kept",
    )
    lu.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="send the API's and agents' traces and metrics to the OTLP/HTTP collector you "
        "run there (e.g. http://127.0.0.1:4318) instead of files",
    )
    lu.add_argument(
        "--no-telemetry",
        action="store_true",
        help="record no traces or metrics (default: JSON lines under <stack dir>/telemetry/)",
    )
    lu.add_argument(
        "--sim-agents",
        type=int,
        default=0,
        metavar="N",
        help="also start N simulated clients (no fio, declared figures) on pool 'sim'",
    )
    si = losub.add_parser(
        "sim-agents", help="start simulated clients against the running stack (pool 'sim')"
    )
    si.add_argument("count", type=int)
    si.add_argument("--pool", default="sim", help="a pool the stack declares")
    si.add_argument("--iops", type=int, default=1000, help="each client's I/Os per second")
    si.add_argument("--latency-us", type=float, default=100.0, help="each I/O's latency, µs")
    losub.add_parser("down")
    losub.add_parser("status")
    lo.set_defaults(func=cmd_local)
    return p


def _undecodable(args: argparse.Namespace) -> str | None:
    """The option whose value is not text: bytes the terminal's encoding could not decode
    arrive as lone surrogates (PEP 383), which no URL, header or JSON body can carry."""
    for name, value in vars(args).items():
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str):
                try:
                    v.encode("utf-8")
                except UnicodeEncodeError:
                    return name
    return None


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if (name := _undecodable(args)) is not None:
        print(f"benchctl: {name}: not valid UTF-8 text", file=sys.stderr)
        return EXIT_BAD_INPUT
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
    except StackError as e:
        print(f"benchctl: {e}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:  # (following a run says more: benchctl.cli_follow)
        print("\nbenchctl: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
