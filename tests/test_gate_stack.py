"""The regression gate through the real stack, as a pipeline meets it: real fio on a block
device of its own under a cgroup v1 blkio throttle. Steady runs at the device's first limit
exit 0; the device then slowed to a quarter, every run exits 3 through `benchctl run --wait
--fail-on-regression`, with the verdict per metric on GET /api/runs/{id} and in the JUnit
file (the issue's sequence: 6 runs, then 5 slowed; the old rule exited 0, 0, 0, 3, 0)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchctl.cli import main
from tests import blkio
from tests.conftest import AgentFactory, TmpfsFactory

BASE_IOPS = 1000  # well under what fio reads from a RAM disk on this machine, even when busy
SLOW_IOPS = 250  # the slowdown: a quarter
GOOD_RUNS, SLOW_RUNS = 6, 5
# A workload no other test runs, so its series holds this test's runs only.
WORKLOAD = ["--rw", "randread", "--bs", "4k", "--size", "20m", "--iodepth", "4", "--runtime", "2"]


@pytest.fixture
def slowable(tmp_path: Path, tmpfs: TmpfsFactory) -> Iterator[tuple[Path, blkio.Throttle]]:
    with blkio.ram_disk(tmp_path, tmpfs) as mounted, blkio.throttle(mounted) as t:
        yield mounted, t


def _run(
    api: httpx.Client, pool: str, junit: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, Any], str]:
    argv = ["--api-url", str(api.base_url), "run", "--target", "vol2", "--pool", pool]
    argv += [*WORKLOAD, "--direct", "--wait", "--fail-on-regression", "--format", "json"]
    code = main([*argv, "--junit", str(junit)])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


# Its baseline runs are uncapped fio: their spread is the machine's spare CPU, so it runs
# with nothing else of the suite (the timing phase).
@pytest.mark.timing
def test_every_slowed_run_fails_the_gate(
    api: httpx.Client,
    agents: AgentFactory,
    pool: str,
    slowable: tuple[Path, blkio.Throttle],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    disk, throttle = slowable
    agent = agents(targets={"vol2": str(disk)})
    throttle.enter(agent.pid)  # fio, a child of the agent, inherits the group
    throttle.read_iops(BASE_IOPS)
    codes, seen, ids = [], [], []
    for i in range(GOOD_RUNS + SLOW_RUNS):
        if i == GOOD_RUNS:
            throttle.read_iops(SLOW_IOPS)
        junit = tmp_path / f"gate-{i}.xml"
        code, run, err = _run(api, pool, junit, capsys)
        assert run["state"] == "completed", err
        gate = run["gate"]
        iops = {m["metric"]: m for m in gate["metrics"]}
        read = run["aggregate"]["read"]
        seen.append((code, gate["verdict"], round(read["iops"]), round(read["lat_ns"]["p99"])))
        codes.append(code)
        ids.append(run["id"])
        # The service's verdict, with the figures behind it, is what the CLI reports.
        assert iops["read.bw_bytes"]["verdict"] == iops["read.iops"]["verdict"]
        assert iops["read.iops"]["value"] == read["iops"]
        # Its latency is total latency's p99, the figure the run's view shows first.
        assert iops["read.lat.p99"]["value"] == read["lat_ns"]["p99"]
        cases = ET.parse(junit).getroot()
        assert cases.get("tests") == str(len(gate["metrics"]))
        assert cases.get("failures") == str(
            sum(m["verdict"] == "regression" for m in gate["metrics"])
        )
        if i >= GOOD_RUNS:
            # A real slowdown: the device at a quarter of its rate (a throttle lets a time
            # slice's worth through at once, so a 2 s run reads somewhat over 250). It
            # dispatches in slices, so p99 stays near one slice at both rates: the gate
            # fails IOPS and bandwidth, not p99.
            assert read["iops"] < BASE_IOPS / 2, seen
            assert iops["read.iops"]["verdict"] == "regression", (seen, iops["read.iops"])
            assert iops["read.iops"]["reference"]["points"] >= GOOD_RUNS - 1
            assert "regression: step 0 read.iops" in err
            failure = cases.find("testcase[@name='read.iops']/failure")
            assert failure is not None and failure.get("type") == "regression"
    print("runs (exit code, verdict, IOPS, total p99 ns):", *seen, sep="\n  ")
    assert codes == [0] * GOOD_RUNS + [3] * SLOW_RUNS, seen
    assert [s[1] for s in seen[:GOOD_RUNS]] == ["not-enough-history"] * 5 + ["pass"]
    # One event: every slowed run counts in the first slowed run's regression, which the
    # API's view of the run names as the CLI printed it.
    for run_id in ids[GOOD_RUNS:]:
        gate = api.get(f"/api/runs/{run_id}").json()["gate"]
        regs = {m["regression_id"] for m in gate["metrics"] if m["verdict"] == "regression"}
        assert regs and all(r.endswith(f".gate.{ids[GOOD_RUNS]}") for r in regs), regs
