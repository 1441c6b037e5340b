"""What bound the run, proven on the real stack: a target held at 40 MiB/s of reads by a
real cgroup v1 blkio throttle on the agent (fio inherits its cgroup) is named as the bound
when declared at 40 MiB/s, and not blamed when declared at 4,000 MiB/s."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.blob import BlobArtifacts
from core.artifacts import unpack_json
from core.counters import CounterSeries
from core.host_counters import CountersSummary
from tests import blkio
from tests.blkio import MIB
from tests.conftest import AgentFactory, TmpfsFactory, wait_state

THROTTLE_MIBPS = 40


@pytest.fixture
def ram_disk(tmp_path: Path, tmpfs: TmpfsFactory) -> Iterator[Path]:
    with blkio.ram_disk(tmp_path, tmpfs) as mounted:
        yield mounted


@pytest.fixture
def throttled(ram_disk: Path) -> Iterator[Any]:
    """Reads of the RAM disk held at 40 MiB/s; yields a function that moves a process into
    the throttled group."""
    with blkio.throttle(ram_disk) as t:
        t.read_bps(THROTTLE_MIBPS * MIB)
        yield t.enter


def _run(api: httpx.Client, pool: str, target: str) -> dict[str, Any]:
    body = {
        "target": target,
        "pool": pool,
        # Direct I/O, so every read reaches the device and its throttle.
        "workload": {
            "rw": "randread",
            "bs": "256k",
            "size": "32m",
            "runtime": 6,
            "iodepth": 4,
            "direct": True,
        },
    }
    r = api.post("/api/runs", json=body)
    assert r.status_code == 202, r.text
    run = wait_state(api, r.json()["id"], ("completed", "failed"), timeout=120)
    assert run["state"] == "completed", run
    return run


def test_a_target_held_at_its_declared_limit_is_named_the_bound(
    api: httpx.Client, agents: AgentFactory, pool: str, ram_disk: Path, throttled: Any
) -> None:
    agent = agents(targets={"capped": str(ram_disk), "roomy": str(ram_disk)})
    throttled(agent.pid)

    capped = _run(api, pool, "capped")["aggregate"]
    read_mibps = capped["read"]["bw_bytes"] / MIB
    assert 36 <= read_mibps <= 41, read_mibps  # the throttle holds it
    bound = capped["bound_by"]
    assert bound["kind"] == "target", capped["ceilings"]
    assert bound["name"] == "target capped read throughput"
    assert bound["limit"] == THROTTLE_MIBPS * MIB
    assert 0.9 <= bound["utilisation"] <= 1.02
    # utilisation is measured / limit, the measured figure the aggregate's own
    assert bound["measured"] == pytest.approx(capped["read"]["bw_bytes"])
    print(f"capped: {read_mibps:.2f} MiB/s, bound_by {bound['kind']} {bound['utilisation']:.1%}")

    roomy = _run(api, pool, "roomy")["aggregate"]
    assert roomy["read"]["bw_bytes"] / MIB <= 41  # still held by the throttle
    assert roomy["bound_by"]["kind"] != "target", roomy["bound_by"]
    target = next(c for c in roomy["ceilings"] if c["kind"] == "target")
    assert target["utilisation"] == pytest.approx(roomy["read"]["bw_bytes"] / (4000 * MIB))
    assert target["utilisation"] < 0.02
    print(f"roomy: bound_by {roomy['bound_by']}, target {target['utilisation']:.2%}")


def test_the_agent_stores_its_counters_with_the_result(
    api: httpx.Client, agents: AgentFactory, pool: str, artifacts: BlobArtifacts
) -> None:
    agents()
    run = _run(api, pool, "scratch")
    item = run["items"][0]["id"]
    result = api.get(f"/api/runs/{run['id']}/results/{item}").json()
    summary = CountersSummary.model_validate(result["counters"])
    assert summary.seconds >= 4  # one-second samples inside the 6 s measured period
    assert summary.cpu is not None and summary.net is not None
    # fio's own CPU (percent of one CPU, summed over jobs) is part of the host's busy time.
    fio_pct = (summary.fio_usr_cpu_pct or 0) + (summary.fio_sys_cpu_pct or 0)
    assert summary.fio_usr_cpu_pct is not None
    # Sampled from /proc/stat each second: a per-second maximum, iowait and steal exist.
    assert summary.cpu.source == "proc-stat" and summary.cpu.busy_pct_max is not None
    assert summary.cpu.iowait_pct_mean is not None and summary.cpu.steal_pct_mean is not None
    assert fio_pct <= summary.cpu.busy_pct_max * result["host"]["cpu_count"] + 5
    # The per-second series is the counters artifact, of the size the result names.
    packed = artifacts.get(run["id"], item, "counters")
    assert len(packed) == result["artifacts"]["counters"]["bytes"]
    found = CounterSeries.model_validate(unpack_json(packed))
    assert len(found.points) >= 6
    assert all(p.cpu is not None and "lo" in p.net for p in found.points)
