"""benchctl's commands that need no run: profiles, planning, offline aggregation and
detection, and the local stack."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from benchctl.cli_common import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REGRESSION,
    _api,
    _pairs,
    read_file,
)
from benchctl.client import CliError
from benchctl.local_state import StackError, checkout, state_dir
from benchctl.local_targets import TargetDeclarationError, local_registry
from core.analysis.concurrency import shape_for
from core.analysis.offline import ClientLogs, InputError, aggregate_files
from core.catalogue import PROFILES
from core.runs.plan import outstanding_for
from tables.profiles import profiles_table
from tables.runs import (
    aggregate_table,
    console_for_stdout,
    print_aggregate_notes,
)


def cmd_profiles(a: argparse.Namespace) -> int:
    if a.remote:
        profiles = _api(a).profiles()
    else:
        profiles = [p.describe().model_dump(mode="json") for p in PROFILES]
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


def cmd_aggregate(a: argparse.Namespace) -> int:
    inputs = []
    for name in a.files:
        path = Path(name)
        text = read_file(name, "FILE")
        logs = None
        if a.logs:  # one directory per client: its fio JSON beside its 1 s logs
            iops, bw, hist = (
                [read_file(str(p), "log") for p in sorted(path.parent.glob(pattern))]
                for pattern in ("*_iops.*log", "*_bw.*log", "*_clat_hist.*log")
            )
            logs = ClientLogs(iops, bw, hist) if iops or bw else None
        inputs.append((name, text, logs))
    try:
        agg = aggregate_files(inputs).model_dump(mode="json")
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
    # Here, not at the top: the detector's numpy is ~0.3 s of every other command's start.
    from core.analysis.changepoint import detect_csv

    text = read_file(a.file, "FILE.csv")
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


def _target_dirs(targets: dict[str, str], create: bool) -> None:
    """A target is a directory the agents measure: one that does not exist is a typo
    (creating it would benchmark whatever disk holds its parent), unless --create."""
    for alias, path in targets.items():
        where = Path(path)
        if where.is_dir():
            continue
        if where.exists():
            raise CliError(f"--target {alias}={path}: not a directory", EXIT_BAD_INPUT)
        if not create:
            raise CliError(
                f"--target {alias}={path}: no such directory (give --create to make it)",
                EXIT_BAD_INPUT,
            )


def cmd_local(a: argparse.Namespace) -> int:
    checkout()
    try:  # the emulators' SDKs: the API's packages, in a source checkout
        from benchctl import localstack
    except ImportError as e:
        missing = f"the local stack needs the API's packages ({e.name}): make install"
        raise StackError(missing) from None

    if a.local_cmd == "up":
        return _local_up(a)
    if a.local_cmd == "sim-agents":
        return _local_sims(a)
    if a.local_cmd == "down":
        stopped = localstack.down()
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        return EXIT_OK
    return _local_status()


MAX_API_INSTANCES = 16  # a 2-core machine runs a few; more only measure the machine


def _local_up(a: argparse.Namespace) -> int:
    from benchctl import localstack
    from benchctl.local_sim import SIM_POOL, sim_pool_spec, start_sim_agents, with_sim_targets

    targets = _pairs(a.target, "--target")
    if not targets:
        raise CliError("give at least one --target NAME=DIR", EXIT_BAD_INPUT)
    try:
        registry = local_registry(targets, a.target_limits, a.target_facts)
    except TargetDeclarationError as e:
        raise CliError(str(e), EXIT_BAD_INPUT) from None
    if not 1 <= a.api_instances <= MAX_API_INSTANCES:
        raise CliError(f"--api-instances: 1 to {MAX_API_INSTANCES}", EXIT_BAD_INPUT)
    _target_dirs(targets, a.create)
    localstack.ensure_installed()
    sims = a.sim_agents
    if sims < 0:
        raise CliError("--sim-agents must be 0 or more", EXIT_BAD_INPUT)
    stack = localstack.up(
        agents=a.agents,
        targets=targets,
        visibility_timeout=a.visibility_timeout,
        fresh=a.fresh,
        api_env={"BENCH_TARGETS": with_sim_targets(registry) if sims else registry},
        max_agents=a.max_agents,
        idle_s=a.idle,
        price=a.price,
        telemetry=_telemetry(a.otlp_endpoint, a.no_telemetry),
        extra_pools=[sim_pool_spec(sims)] if sims else None,
        api_instances=a.api_instances,
    )
    if sims:
        start_sim_agents(stack, sims)
        print(f"{sims} simulated client(s) on pool {SIM_POOL}: runs reach them with --pool sim")
    behind = f" ({a.api_instances} instances behind nginx)" if a.api_instances > 1 else ""
    print(
        f"local stack up: API {stack.api_url}{behind}, {a.agents} agent(s), "
        f"targets {', '.join(f'{k}={v}' for k, v in stack.targets.items())}"
    )
    if stack.port_note:
        print(stack.port_note)
    print(_data_line(stack.dir, "started empty" if a.fresh else "kept from before"))
    return EXIT_OK


def _local_sims(a: argparse.Namespace) -> int:
    from benchctl import localstack
    from benchctl.local_sim import start_sim_agents

    current = localstack.Stack.load()
    if current is None or not any(p.alive() for p in current.procs):
        raise CliError("no local stack is running: benchctl local up first", EXIT_BAD_INPUT)
    if a.count < 1 or a.iops < 1 or a.latency_us <= 0:
        raise CliError("count and --iops must be at least 1, --latency-us above 0", EXIT_BAD_INPUT)
    if a.pool not in current.pool_names:
        known = ", ".join(current.pool_names)
        raise CliError(f"--pool {a.pool}: the stack declares {known}", EXIT_BAD_INPUT)
    p = start_sim_agents(current, a.count, pool=a.pool, iops=a.iops, latency_us=a.latency_us)
    print(f"{a.count} simulated client(s) on pool {a.pool}, pid {p.pid}, log {p.log}")
    return EXIT_OK


def _local_status() -> int:
    from benchctl import localstack

    current = localstack.Stack.load()
    if current is None:
        print("local stack: not running")
        print(_data_line(str(state_dir()), "kept for the next `up`"))
        return EXIT_OK
    print(f"local stack in {current.dir}: API {current.api_url}")
    for p in current.procs:
        port = f" port {p.port}" if p.port else ""
        print(f"  {p.name:<12} pid {p.pid:<7} {'running' if p.alive() else 'stopped'}{port}")
    print(_data_line(current.dir, "kept across `down`/`up`; `up --fresh` starts empty"))
    where = current.telemetry.get("BENCH_TELEMETRY_DIR") or current.telemetry.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    print(f"telemetry: {where or 'off'} (docs/operations.md)")
    return EXIT_OK


def _telemetry(otlp_endpoint: str | None, off: bool) -> dict[str, str]:
    """The API's and agents' telemetry settings (adapters/telemetry.py): a collector, or
    files in the stack's directory; spans written within a second, metrics every 10 s."""
    if off:
        return {}
    quick = {"OTEL_BSP_SCHEDULE_DELAY": "1000", "OTEL_METRIC_EXPORT_INTERVAL": "10000"}
    if otlp_endpoint:
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": otlp_endpoint, **quick}
    return {"BENCH_TELEMETRY_DIR": str(state_dir() / "telemetry"), **quick}


def _data_line(directory: str, note: str) -> str:
    from benchctl.local_state import DATA_DIRS

    dirs = ", ".join(str(Path(directory) / name) for name in DATA_DIRS)
    return f"data: {dirs} ({note})"
