"""benchctl as a new user met it (issue 16, point 6), and the report's charts on figures
known in advance (pure: no stack)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.progress import Progress, TextColumn

from benchctl.cli_follow import _progress_rows
from benchctl.cli_reports import number
from benchctl.local_space import space_problem
from benchctl.localstack import Stack
from core.catalogue import PROFILES
from core.runs.working_set import human_bytes
from core.units import clients_text, parse_size
from reports.curve_figures import latency_curve_figure, scaleout_figure
from reports.series_figures import series_figures
from tables.fleet import pools_table, vm_time
from tables.lists import curves_markdown
from tables.profiles import profiles_table
from tables.runs import print_run
from tests.conftest import TmpfsFactory


def benchctl(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BENCH_API_URL": "", **kw.pop("env", {})}
    return subprocess.run(
        [sys.executable, "-m", "benchctl", *args], text=True, env=env, timeout=60, **kw
    )


def recorded(draw: Any) -> str:
    console = Console(record=True, width=200, file=io.StringIO())
    draw(console)
    return console.export_text()


def _agg(step: int, clients: int, iops: float) -> dict[str, Any]:
    lat = {"p50": 1e5, "p99": 2e5, "p99.9": 3e5}
    read = {"iops": iops, "bw_bytes": iops * 4096, "clat_ns": lat, "percentiles_basis": "x"}
    return {"step": step, "clients": clients, "point": None, "read": read, "per_client": []}


def test_table_output_shows_steady_state_fill_and_repetition_spread() -> None:
    result = {
        "fill": {"ran": True, "seconds": 3.5, "marker": "m"},
        "steadystate": {"ss": "iops_slope", "attained": 1},
    }
    items = [
        {"id": f"i{s}{c}", "step": s, "client": c, "state": "completed", "agent_id": f"agent-{c}"}
        | {"result": result}
        for s in (0, 1)
        for c in (0, 1)
    ]
    steps = [
        {"step": s, "clients": 2, "point": None, "aggregate": _agg(s, 2, iops)}
        for s, iops in ((0, 1000.0), (1, 1200.0))
    ]
    run = {"id": "r-1", "target": "t", "state": "completed", "fill": True}
    run |= {"items": items, "steps": steps, "aggregate": None}
    text = recorded(lambda c: print_run(run, c))
    assert "step 0 (2 clients): steady state (iops_slope): attained on 2 of 2 clients" in text
    assert "step 1 (2 clients): fill ran on 2 of 2 clients (longest 3.5 s)" in text
    # Mean 1,100, population sd 100: CV 9.1 %.
    assert "spread across 2 repetitions (2 clients): mean 1,100, min 1,000, max 1,200" in text
    assert "CV 9.1%" in text
    skipped = {**result, "fill": {"ran": False, "seconds": 0.0, "marker": "m"}}
    run["items"] = [{**i, "result": skipped} for i in items]
    assert "fill skipped on 2 clients: a valid fill marker" in recorded(lambda c: print_run(run, c))


def test_progress_bar_names_each_clients_agent() -> None:
    run = {"state": "running", "target": "t", "steps": [{"step": 0, "workload": {"runtime": 5}}]}
    run["items"] = [
        {"id": "a", "step": 0, "client": 0, "state": "running", "agent_id": "agent-1"},
        {"id": "b", "step": 0, "client": 1, "state": "queued", "agent_id": None},
    ]
    rows = _progress_rows(run, 0)

    def draw(console: Console) -> None:
        with Progress(TextColumn("{task.description}"), console=console, auto_refresh=False) as p:
            for _, desc, total, done in rows:
                p.add_task(desc, total=total, completed=int(done))

    text = recorded(draw)
    assert "step 0 client 0 [agent-1]: running" in text
    assert "step 0 client 1 [unclaimed]: queued" in text


def test_one_client_is_singular() -> None:
    assert clients_text(1) == "1 client" and clients_text(4) == "4 clients"


def test_profiles_table_shows_each_profiles_working_set_per_client() -> None:
    text = recorded(
        lambda c: c.print(profiles_table([p.describe().model_dump(mode="json") for p in PROFILES]))
    )
    lines = {line.split("│")[1].strip(): line for line in text.splitlines() if "│" in line}
    # 25 jobs x 10 GiB each (fio: one file per job).
    assert "250 GiB" in lines["anf-vdbench-randread-8k"]
    for p in PROFILES:
        w = p.workload
        jobs = w.numjobs if "fio" in p.engines else 1
        files = max(jobs, p.files_per_target if "diskspd" in p.engines else 1)
        want = files * parse_size(w.size)
        if w.metadata is not None:  # a tree of small files: each job's files of file_size
            files = w.numjobs * w.metadata.files_per_dir
            want = files * w.metadata.file_size
            assert f"{files:,} files" in lines[p.name], p.name
            assert (human_bytes(want) in lines[p.name]) == (want > 0), (p.name, want)
            assert "0 B" not in lines[p.name] and "randread" not in lines[p.name]
        assert f"{want / 2**30:g} GiB" in lines[p.name] or want < 2**30, (p.name, want)


def test_profiles_keep_their_names_whole_in_100_columns() -> None:
    """The name is the column one types: a 100-column terminal wraps the others."""
    console = Console(record=True, width=100, file=io.StringIO())
    console.print(profiles_table([p.describe().model_dump(mode="json") for p in PROFILES]))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 100
    firsts = [line.split("│")[1].strip() for line in text.splitlines() if line.count("│") > 2]
    assert [p.name for p in PROFILES] == [f for f in firsts if f]
    meta = next(line for line in text.splitlines() if "anf-large-volume-filetree" in line)
    assert "metadata" in meta and "32,000" in meta


def test_figures_are_written_as_people_write_them() -> None:
    assert [number(v) for v in (32665.000000000004, 2.0, 1234.5678, 0.1 + 0.2)] == [
        32665,
        2,
        "1234.568",
        "0.3",
    ]
    assert number(7) == 7 and number(None) is None and number("x") == "x"


def test_client_vm_time_has_one_unit() -> None:
    assert [vm_time(s) for s in (0, 12.44, 59.96, 3600, 7325.5, 360_000)] == [
        "0:00:00.0",
        "0:00:12.4",
        "0:01:00.0",
        "1:00:00.0",
        "2:02:05.5",
        "100:00:00.0",
    ]
    view = {
        "agents": [],
        "pools": [
            {"pool": p, "elastic": False, "size": 1, "live": 1, "busy": 0, "used_s": used}
            | {"price_per_hour": None, "cost": None, "min": 0}
            for p, used in (("small", 12.0), ("big", 7200.0))
        ],
    }
    text = recorded(lambda c: c.print(pools_table(view)))
    assert "0:00:12.0" in text and "2:00:00.0" in text and " h " not in text


def test_show_curve_markdown_is_markdown() -> None:
    curves = {
        "run_id": "r-1",
        "latency": [
            {"step": 0, "point": None, "clients": 1, "iops": 1000.0, "read_clat_p50_ns": 1e5}
            | {"read_clat_p99_ns": 3e5}
        ],
        "scaleout": [
            {"point": "", "clients": 1, "iops": 1000.0, "bw_bytes": 4096000.0}
            | {"linear_iops": 1000.0, "efficiency": 1.0}
        ],
        "repetitions": [],
    }
    md = curves_markdown(curves)
    assert md.startswith("### Curves of run `r-1`")
    # A result without total latency shows completion latency, named, in microseconds.
    assert "| step | point | clients | IOPS | read completion p50 / p99 |" in md
    assert "| 0 |  | 1 | 1,000 | 100 µs / 300 µs | - |" in md
    assert "| - | 1 | 1,000 | 3.9 | 1,000 | 100% |" in md and "┃" not in md


@pytest.mark.slow
def test_detect_exits_0_on_an_improvement_and_3_on_a_regression(tmp_path: Path) -> None:
    rows = [f"2026-11-01T{i // 60:02d}:{i % 60:02d}:00Z" for i in range(80)]
    for name, after, code in (("up.csv", 60_000, 0), ("down.csv", 40_000, 3)):
        values = [50_000 + (i % 3) * 100 if i < 40 else after + (i % 3) * 100 for i in range(80)]
        path = tmp_path / name
        lines = [f"{t},{v}\n" for t, v in zip(rows, values, strict=True)]
        path.write_text("timestamp,value\n" + "".join(lines))
        r = benchctl("detect", "--higher-is-better", str(path), capture_output=True)
        assert r.returncode == code, (name, r.stdout, r.stderr)


@pytest.mark.slow
def test_output_into_a_closed_pipe_ends_quietly() -> None:
    for fmt in ("table", "json"):  # rich's console, and print()
        read, write = os.pipe()
        os.close(read)  # like `| head` once it has what it wanted
        try:
            r = benchctl("profiles", "--format", fmt, stdout=write, stderr=subprocess.PIPE)
        finally:
            os.close(write)
        # No traceback; 1 as Python's own convention for EPIPE (and rich's).
        assert r.returncode == 1 and r.stderr == "", (fmt, r.stderr)


@pytest.mark.slow
def test_local_stack_refuses_a_working_set_larger_than_the_targets_free_space(
    tmpfs: TmpfsFactory, tmp_path: Path
) -> None:
    target = tmpfs(tmp_path / "small", size="16m")
    body = {"target": "scratch", "clients": [1, 2], "workload": {"size": "12m", "runtime": 1}}
    # Every local agent lays out in the same directory: 2 clients x 12 MiB > 16 MiB.
    problem = space_problem(body, {"scratch": str(target)})
    assert problem is not None and problem.startswith("workload.size:")
    assert "12 MiB per client x 2 clients = 24 MiB on local target scratch" in problem
    assert space_problem({**body, "clients": 1}, {"scratch": str(target)}) is None
    assert space_problem(body, {"other": str(target)}) is None  # not a local directory

    # benchctl refuses before submitting: the API it would submit to does not even listen.
    state = tmp_path / "state"
    stack = Stack(dir=str(state), queue_port=1, cosmos_port=1, api_port=9, blob_port=1)
    stack.targets = {"scratch": str(target)}
    stack.save()
    r = benchctl(
        "--api-url",
        stack.api_url,
        "run",
        "--target",
        "scratch",
        "--clients",
        "1,2",
        "--size",
        "12m",
        "--runtime",
        "1",
        env={"BENCH_LOCAL_DIR": str(state)},
        capture_output=True,
    )
    assert r.returncode == 2, r.stderr
    assert "workload.size" in r.stderr and "24 MiB on local target scratch" in r.stderr


def test_charts_of_a_rate_sweep_and_a_series_on_known_figures() -> None:
    # The unthrottled step first (as it runs), then the rate points: the curve joins only
    # the rate points, lowest rate first, and draws the unthrottled maximum apart.
    latency = [
        {"step": 0, "point": "max", "mode": "rate-max", "clients": 1, "iops": 10_500.0}
        | {"read_lat_p50_ns": 2e6, "read_lat_p99_ns": 9e6, "read_lat_p99.9_ns": 2e7}
    ] + [
        {"step": i + 1, "point": f"rate={p}%", "mode": "rate", "clients": 1, "iops": 100.0 * p}
        | {"read_lat_p50_ns": 1e5 * (1 + i), "read_lat_p99_ns": 4e5 * (1 + i)}
        | {"read_lat_p99.9_ns": 5e5 * (1 + i)}
        for i, p in enumerate((10, 50, 100))
    ]
    fig = latency_curve_figure({"latency": latency, "scaleout": []})
    assert fig is not None
    traces = {t.name: t for t in fig.fig.data}
    assert list(traces["read p99"].x) == [1000.0, 5000.0, 10000.0]
    assert list(traces["read p99"].y) == [0.4, 0.8, 1.2]
    assert traces["read p99"].mode == "lines+markers"
    apart = traces["read p99 unthrottled (max IOPS)"]
    assert list(apart.x) == [10_500.0] and apart.mode == "markers"
    assert fig.fig.layout.yaxis.title.text == "total latency, ms (log scale)"
    assert scaleout_figure({"scaleout": [{"point": "", "clients": 1}]}) is None  # 1 point

    rows = [
        {"time_ms": 1_700_000_000_000 + i * 60_000, "run_id": f"r-{i}", "segment": i // 4}
        | {"new_segment": i == 4, "read.iops": 1000.0 if i < 6 else 800.0}
        | {"gate": {"read.iops": {"verdict": "regression" if i == 6 else "pass"}}}
        for i in range(8)
    ]
    regression: dict[str, Any] = {"metric": "read.iops", "kind": "regression"}
    regression |= {"first_run_id": "r-6", "change_pct": -20.0}
    (fig_iops,) = series_figures({"history": rows, "regressions": [regression]})
    spec = json.loads(fig_iops.json())
    assert len(spec["data"][0]["x"]) == 8
    assert spec["data"][1]["name"] == "gate failed" and len(spec["data"][1]["x"]) == 1
    lines = [s for s in spec["layout"]["shapes"] if s["type"] == "line"]
    assert [s["x0"] for s in lines] == [rows[4]["time_ms"], rows[6]["time_ms"]]
    notes = [a["text"] for a in spec["layout"]["annotations"]]
    assert notes == ["segment 1", "regression IOPS -20.0%"]


def test_step_headings_and_per_client_rows_name_the_swept_value() -> None:
    """An iodepth sweep on one client: each step's heading and each client's row say which
    iodepth it ran (issue 11.3), and no scaling efficiency is claimed between them."""
    lat = {"p50": 1e5, "p99": 2e5, "p99.9": 3e5}
    items, steps = [], []
    for s, depth in enumerate((1, 64)):
        read = {"iops": 1000.0 * (s + 1), "bw_bytes": 4096e3 * (s + 1), "clat_ns": lat}
        items.append(
            {"id": f"i{s}", "step": s, "client": 0, "state": "completed", "agent_id": "agent-1"}
            | {"result": {"read": read}}
        )
        agg = _agg(s, 1, 1000.0 * (s + 1)) | {"point": f"iodepth={depth}"}
        steps.append({"step": s, "clients": 1, "point": f"iodepth={depth}", "aggregate": agg})
    run = {"id": "r-sweep", "target": "vol1", "state": "completed", "items": items}
    text = recorded(lambda c: print_run(run | {"steps": steps}, c))
    assert "step 0 (iodepth=1, 1 client)" in text and "step 1 (iodepth=64, 1 client)" in text
    rows = [line for line in text.splitlines() if "agent-1" in line]
    assert len(rows) == 2
    assert "iodepth=1," in rows[0] and "iodepth=64," in rows[1]
    assert "efficiency" not in text
