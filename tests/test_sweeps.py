"""Catalogue runs, sweeps and fill end to end: the real queue, agents
and fio; the Cosmos DB stand-in."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import httpx
import pytest

from adapters.cosmos import CosmosStore
from tests.conftest import AgentFactory, wait_state


def test_rate_sweep_draws_a_rising_latency_curve(
    api: httpx.Client, agents: AgentFactory, pool: str
) -> None:
    agents()
    body = {
        "target": "scratch",
        "pool": pool,
        "workload": {"rw": "randread", "bs": "4k", "iodepth": 4, "size": "8m", "runtime": 2},
        # Points below saturation, where the cap binds: at 80-100% of a maximum measured on
        # a busy 2-core machine, noise rather than the cap decides the order.
        "sweep": {"rate_pct": [10, 20, 30, 40, 50]},
    }
    run_id = api.post("/api/runs", json=body).json()["id"]
    run = wait_state(api, run_id, ("completed", "failed"), timeout=240)
    assert run["state"] == "completed", run["error"]
    curve = api.get(f"/api/runs/{run_id}/curves").json()["latency"]
    rated = [p for p in curve if p["point"].startswith("rate=")]
    assert [p["point"] for p in rated] == [f"rate={p}%" for p in (10, 20, 30, 40, 50)]
    iops = [p["iops"] for p in rated]
    assert all(b > a for a, b in pairwise(iops)), iops
    maximum = curve[0]["iops"]
    assert iops[0] == pytest.approx(0.1 * maximum, rel=0.25)
    assert all(p["read_lat_p99_ns"] >= p["read_clat_p99_ns"] > 0 for p in curve)
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchctl",
            "--api-url",
            str(api.base_url),
            "show",
            run_id,
            "--curve",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(shown.stdout)["latency"] == curve
    # Each rate step's stored workload carries the cap it was given.
    caps = [s["workload"]["rate_iops"] for s in run["steps"][1:]]
    assert caps == sorted(caps) and caps[0] == round(0.1 * maximum)


def test_profile_override_is_stored_resolved_and_comparable(api: httpx.Client, pool: str) -> None:
    def submit(tags: dict[str, str], bs: str) -> dict:  # type: ignore[type-arg]
        body = {
            "target": "scratch",
            "pool": pool,
            "profile": "anf-vdbench-randread-8k",
            "workload": {"bs": bs, "runtime": 5, "size": "8m"},
            "tags": tags,
        }
        run_id = api.post("/api/runs", json=body).json()["id"]
        run: dict = api.get(f"/api/runs/{run_id}").json()  # type: ignore[type-arg]
        api.delete(f"/api/runs/{run_id}")  # no agent in this pool: nothing runs
        return run

    a = submit({"commit": "a"}, "8k")
    assert a["profile"] == "anf-vdbench-randread-8k" and a["profile_version"] == 1
    assert a["workload"] == {
        **a["workload"],
        "bs": "8k",
        "runtime": 5,
        "numjobs": 25,
        "ramp_time": 60,
        "size": "8m",
    }
    assert a["fill"] is True  # the profile's default
    b = submit({"commit": "b"}, "8k")
    c = submit({"commit": "a"}, "16k")
    assert a["comparison_key"] == b["comparison_key"]  # differ only in a tag
    assert a["comparison_key"] != c["comparison_key"]  # differ in bs
    names = {p["name"] for p in api.get("/api/profiles").json()["profiles"]}
    assert "anf-vdbench-randread-8k" in names and len(names) == 17
    assert {"azfiles-smb-metadata-smallfiles", "anf-large-volume-filetree"} <= names
    bad = api.post("/api/runs", json={"target": "scratch", "pool": pool, "profile": "nope"})
    assert bad.status_code == 400 and bad.json()["errors"][0]["field"] == "profile"


@pytest.mark.fio_beside  # no figure held to a known load (tests/lanes.py)
def test_fill_runs_once_per_target_and_size(
    api: httpx.Client, store: CosmosStore, agents: AgentFactory, pool: str, scratch: Path
) -> None:
    agents()

    def run(size: str) -> dict:  # type: ignore[type-arg]
        body = {
            "target": "scratch",
            "pool": pool,
            "fill": True,
            "workload": {"rw": "randread", "size": size, "runtime": 1},
        }
        run_id = api.post("/api/runs", json=body).json()["id"]
        done = wait_state(api, run_id, ("completed", "failed"), timeout=90)
        assert done["state"] == "completed", done["error"]
        fill = store.results.of_run(run_id)[0].fill
        assert fill is not None
        return fill.model_dump()

    first = run("8m")
    assert first["ran"] is True
    assert run("8m")["ran"] is False  # valid marker: skipped
    assert run("16m")["ran"] is True  # another size: filled again
    markers = list((scratch / ".benchsvc").rglob(".fill-*.json"))
    assert len(markers) == 2


@pytest.mark.fio_beside  # no figure held to a known load (tests/lanes.py)
def test_diskspd_item_runs_through_the_agent(
    api: httpx.Client, store: CosmosStore, agents: AgentFactory, pool: str
) -> None:
    standin = Path(__file__).parent / "diskspd_standin.py"
    agents(extra=["--diskspd", str(standin)])
    body = {
        "target": "scratch",
        "pool": pool,
        "engine": "diskspd",
        "profile": "azfiles-diskspd-randwrite-4k",
        "workload": {"ramp_time": 0, "runtime": 2, "size": "8m"},
    }
    run_id = api.post("/api/runs", json=body).json()["id"]
    run = wait_state(api, run_id, ("completed", "failed"), timeout=90)
    assert run["state"] == "completed", run["error"]
    result = store.results.of_run(run_id)[0].model_dump(mode="json")
    assert result["engine"] == "diskspd" and result["engine_version"]
    full = api.get(f"/api/runs/{run_id}/results/{result['id']}").json()
    assert result["read"]["clat_bins_ns"] == {} and full["series"]["read"]
    assert "<Results" in full["raw"]["diskspd_xml"]
    agg = run["aggregate"]
    assert agg["read"]["percentiles_exact"] is False  # DiskSpd exports no histogram
    assert agg["read"]["clat_ns"]["p99"] > 0
