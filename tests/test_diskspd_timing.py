"""DiskSpd timing: where the measured period lies on the clock, from DiskSpd's own XML; the
cool-down carried from the profile to the agent; and the agent's DiskSpd path end to end
(layout before ready, the measured run without -c), with tests/diskspd_standin.py.

A DiskSpd run (IORequestGenerator.cpp): set-up, warm-up -W, measured <TestTimeSeconds>,
cool-down -C, threads stopped; then <RunTime> is stamped (whole UTC seconds) and the XML
printed. The helpers below lay such a timeline out and write the XML DiskSpd would print.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from adapters.cosmos import CosmosStore
from core.engines.diskspd_time import DiskSpdTiming, measured_start_s
from core.engines.diskspd_xml import parse_xml
from core.engines.results import build_diskspd_result
from core.models import HostFacts, MountFacts, WorkItem, Workload
from core.models.stored import Run, Step
from core.runs.plan import plan_items
from tests.conftest import AgentFactory, wait_state

FIXTURE = Path(__file__).parent / "data" / "diskspd" / "with-latency-and-iops.xml"
RUN_ID = "r-" + "0" * 32
HOST = HostFacts(hostname="win-0", kernel="10.0", os="Windows", cpu_count=4)
MOUNT = MountFacts(
    alias="scratch", path="Z:\\", mount_point="Z:\\", fstype="smb", options="", source="s"
)


def item(client: int = 0, **fields: Any) -> WorkItem:
    return WorkItem(
        run_id=RUN_ID,
        item_id=f"{RUN_ID}.s0.c{client}",
        step=0,
        client=client,
        clients=2,
        pool="win",
        targets=["scratch"],
        engine="diskspd",
        workload=Workload(runtime=10, **fields),
    )


def run_time(stamp: float) -> str:
    t = datetime.fromtimestamp(stamp, UTC)
    return f"{t.year}/{t.month:02}/{t.day:02} {t.hour:02}:{t.minute:02}:{t.second:02} UTC"


def capture(
    launched: float, *, setup: float, warmup: int = 5, cooldown: int = 0, teardown: float = 0.0
) -> tuple[str, float, float]:
    """The fixture (10.00 s measured, -D1000) as printed by a run launched at ``launched``:
    returns its XML, when it was written, and the true start of its measured period."""
    start = launched + setup + warmup
    stamp = start + 10.00 + cooldown + teardown
    doc = FIXTURE.read_text()
    doc = re.sub(r"<RunTime>[^<]*</RunTime>", f"<RunTime>{run_time(stamp)}</RunTime>", doc)
    doc = re.sub(r"<Warmup>\d+</Warmup>", f"<Warmup>{warmup}</Warmup>", doc)
    doc = re.sub(r"<Cooldown>\d+</Cooldown>", f"<Cooldown>{cooldown}</Cooldown>", doc)
    return doc, stamp + 0.01, start


# --------------------------------------------------------------------------- the estimate


def test_measured_start_is_the_stamp_less_cooldown_and_test_time() -> None:
    """The Azure Files line (-W300 -d60 -C5): RunTime 1_700_000_400 and the XML written
    0.42 s into that second put the end of cool-down there, the measured period 65 s
    before it, whatever the set-up took."""
    timing = DiskSpdTiming(300, 60, 5, 60.00, 1_700_000_400)
    start = measured_start_s(timing, launched_s=1_700_000_000.0, written_s=1_700_000_400.42)
    assert start == pytest.approx(1_700_000_400.42 - 5 - 60)


def test_written_instant_is_clamped_to_the_run_time_second() -> None:
    timing = DiskSpdTiming(0, 10, 0, 10.0, 1_000)
    late, early = 1_003.7, 990.0  # the file's time is off: RunTime bounds the stamp
    assert measured_start_s(timing, launched_s=900.0, written_s=late) == 1_001.0 - 10
    assert measured_start_s(timing, launched_s=900.0, written_s=early) == 1_000.0 - 10
    no_run_time = DiskSpdTiming(0, 10, 0, 10.0, None)  # DiskSpd's unit tests blank it
    assert measured_start_s(no_run_time, launched_s=900.0, written_s=late) == late - 10


def test_launch_plus_warmup_is_a_floor() -> None:
    """An XML that would have measured before the process could (a clock step): the start
    is raised to launch + <Warmup>."""
    timing = DiskSpdTiming(30, 10, 0, 10.0, 1_000)
    assert measured_start_s(timing, launched_s=995.0, written_s=1_000.5) == 995.0 + 30


@given(
    launched=st.floats(1.6e9, 1.8e9),
    setup=st.floats(0.0, 600.0),  # files created inside the run take minutes on SMB
    warmup=st.integers(0, 600),
    test_time=st.floats(1.0, 3_600.0),
    cooldown=st.integers(0, 60),
    teardown=st.floats(0.0, 0.5),
    print_delay=st.floats(0.0, 2.0),
)
def test_estimate_is_late_by_at_most_the_stopping_and_printing(
    launched: float,
    setup: float,
    warmup: int,
    test_time: float,
    cooldown: int,
    teardown: float,
    print_delay: float,
) -> None:
    """Brute force over timelines: the estimate never precedes the true start by more
    than <TestTimeSeconds>' rounding (5 ms) and never follows it by more than the
    threads' stopping plus the printing, however long the set-up before the warm-up."""
    start = launched + setup + warmup
    stamp = start + test_time + cooldown + teardown
    timing = DiskSpdTiming(warmup, None, cooldown, round(test_time, 2), math.floor(stamp))
    estimate = measured_start_s(timing, launched_s=launched, written_s=stamp + print_delay)
    slack = 0.005 + 1e-6  # the rounding, and float arithmetic on Unix seconds (~1e-7)
    assert start - slack <= estimate <= start + teardown + print_delay + slack


# --------------------------------------------------------------------------- the result


def test_result_is_placed_from_the_xml_not_the_launch_plus_ramp() -> None:
    """A run whose set-up took 40 s (DiskSpd creating its files inside the run, as before
    the layout pass): the result starts where DiskSpd measured, after its warm-up."""
    launched = 1_700_000_000.3
    xml, written, true_start = capture(launched, setup=40.0, warmup=5)
    r, timeline = build_diskspd_result(
        item(ramp_time=0),  # the XML's <Warmup>5 is what ran
        xml=xml,
        launched_s=launched,
        written_s=written,
        agent_id="win-0",
        host=HOST,
        mounts=[MOUNT],
        scheduled_ms=1_700_000_000_000,
    )
    assert r.started_at_ms == pytest.approx(true_start * 1000, abs=20)
    assert r.ended_at_ms - r.started_at_ms == 10_000
    # The timeline starts where DiskSpd measured: ten 1 s bins from there.
    assert timeline is not None and timeline.start_ms == r.started_at_ms
    assert [b - a for a, b in timeline.bins()] == [1000] * 10
    assert r.start is not None
    # DiskSpd's I/O began at launch + set-up: 40.3 s after the scheduled instant.
    assert r.start.skew_ms == pytest.approx(40_300, abs=20)


def test_clients_with_different_setups_line_up() -> None:
    """Two clients measuring over the same 10 s, one of which took 3 s longer to set up
    (launched earlier): their per-second series cover the same Unix seconds."""
    shared_start = 1_700_000_100.5
    placed: list[tuple[int, int]] = []
    for client, setup in ((0, 0.2), (1, 3.2)):
        launched = shared_start - 5 - setup
        xml, written, true_start = capture(launched, setup=setup, warmup=5, cooldown=5)
        assert true_start == pytest.approx(shared_start)
        _, timeline = build_diskspd_result(
            item(client, ramp_time=5),
            xml=xml,
            launched_s=launched,
            written_s=written,
            agent_id=f"win-{client}",
            host=HOST,
            mounts=[MOUNT],
        )
        assert timeline is not None and timeline.write is not None
        placed.append((timeline.start_ms, len(timeline.write.ios)))
    assert placed[0][1] == placed[1][1] == 10
    assert abs(placed[0][0] - placed[1][0]) <= 20  # the same seconds, to the XML's rounding
    assert placed[0][0] == pytest.approx(shared_start * 1000, abs=20)


def test_relative_series_are_placed_by_whole_seconds() -> None:
    r = parse_xml(FIXTURE.read_text())
    assert [p.t for p in r.series["read"]][:2] == [1, 2]
    moved = r.placed(1_000.99)  # the first second ends at 1001.99, in Unix second 1001
    assert [p.t for p in moved.series["read"]][:2] == [1_001, 1_002]
    assert [p.iops for p in moved.series["read"]] == [p.iops for p in r.series["read"]]


# --------------------------------------------------------------------------- cool-down


def test_work_item_carries_a_bounded_cooldown() -> None:
    assert item().cooldown_s == 0
    for bad in (-1, 3_601):
        with pytest.raises(ValidationError, match="cooldown_s"):
            WorkItem.model_validate({**item().model_dump(), "cooldown_s": bad})


def test_plan_carries_the_run_cooldown_to_each_item() -> None:
    stored: dict[str, Any] = {
        "id": RUN_ID,
        "created_at": "2031-01-01T00:00:00Z",
        "created_ms": 0,
        "request": {"target": "scratch", "pool": "win", "engine": "diskspd"},
        "engine": "diskspd",
        "workload": {},
        "comparison_key": "k",
        "target": "scratch",
        "targets": ["scratch"],
        "pool": "win",
        "step_count": 1,
        "items_total": 2,
        "requested_by": {"name": "t", "role": "admin"},
        "body_hash": "h",
        "files_per_target": 10,
        "cooldown_s": 5,
    }
    step = Step(id=f"{RUN_ID}.s0", run_id=RUN_ID, step=0, clients=2)
    items = plan_items(Run.model_validate(stored), step, Workload())
    assert [(i.cooldown_s, i.files_per_target) for i in items] == [(5, 10), (5, 10)]
    del stored["cooldown_s"]  # a run stored before the field: no cool-down, as before
    assert plan_items(Run.model_validate(stored), step, Workload())[0].cooldown_s == 0


# --------------------------------------------------------------------------- end to end


def standin_log(scratch: Path) -> list[dict[str, Any]]:
    (log,) = scratch.rglob("diskspd-standin.jsonl")
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_agent_lays_out_before_ready_then_measures_on_the_files(
    api: httpx.Client, store: CosmosStore, agents: AgentFactory, pool: str, scratch: Path
) -> None:
    """The Azure Files profile (10 files, 5 s cool-down) through a real agent: DiskSpd runs
    once with -c before the agent reports ready, then at the common start without -c on the
    files at full size, with the profile's -C5; the result is placed where the stand-in
    measured."""
    standin = Path(__file__).parent / "diskspd_standin.py"
    agents(extra=["--diskspd", str(standin)])
    body = {
        "target": "scratch",
        "pool": pool,
        "engine": "diskspd",
        "profile": "azfiles-diskspd-randwrite-4k",
        "workload": {"ramp_time": 1, "runtime": 2, "size": "8m"},
    }
    run_id = api.post("/api/runs", json=body).json()["id"]
    run = wait_state(api, run_id, ("completed", "failed"), timeout=90)
    assert run["state"] == "completed", run["error"]
    layout, measured = standin_log(scratch)

    mib8 = 8 * 1024 * 1024
    assert "-c8M" in layout["argv"] and "-d1" in layout["argv"]
    assert len(layout["left"]) == 10 and set(layout["left"].values()) == {mib8}
    assert not [a for a in measured["argv"] if a.startswith("-c")]
    assert {"-W1", "-d2", "-C5"} <= set(measured["argv"])  # the profile's cool-down
    assert measured["found"] == measured["left"] == layout["left"]  # laid out, untouched

    doc = store.items.get_item(run_id, f"{run_id}.s0.c0")
    assert doc.ready_at is not None
    ready_s = datetime.fromisoformat(doc.ready_at.replace("Z", "+00:00")).timestamp()
    result = store.results.of_run(run_id)[0].model_dump(mode="json")
    scheduled_s = result["start"]["scheduled_ms"] / 1000
    assert layout["stamped"] < ready_s <= scheduled_s <= measured["launched"]

    # Placed from the XML: late by the stand-in's printing at most, early by no more than
    # <TestTimeSeconds>' rounding (5 ms) and a millisecond of our own rounding.
    true_start_ms = measured["measured_began"] * 1000
    assert -10 <= result["started_at_ms"] - true_start_ms < 250
    full = api.get(f"/api/runs/{run_id}/results/{result['id']}").json()
    # Each second stamped at its end; the last at the measured period's end, which the
    # stand-in reports as it timed it (2.00 s, or 2.01 s on a loaded machine).
    assert [p["t_ms"] for p in full["series"]["write"]] == [
        result["started_at_ms"] + 1000,
        result["ended_at_ms"],
    ]
    assert 2000 <= result["ended_at_ms"] - result["started_at_ms"] < 2100
    io_began_ms = measured["warmup_began"] * 1000 - result["start"]["scheduled_ms"]
    assert -10 <= result["start"]["skew_ms"] - io_began_ms < 250
    # The client's CPU comes from DiskSpd's <CpuUtilization> (the stand-in prints the
    # fixture's: 4 CPUs, 19.23 % busy), so the step says what bound it.
    cpu = result["counters"]["cpu"]
    assert (cpu["source"], cpu["busy_pct_mean"], cpu["busiest_cpu_pct"]) == (
        "diskspd",
        19.23,
        31.25,
    )
    assert cpu["busy_pct_max"] is None and cpu["iowait_pct_mean"] is None
