"""Scale-out runs end to end: N distinct agents, one start barrier, one aggregate over the
common window; the real queue, agents and fio; the Cosmos DB stand-in."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from core.runs.finalize import timeline_of
from core.timeline import common_window, totals_in
from tests.conftest import AgentFactory, run_body, wait_state


def test_four_agents_as_four_clients(
    api: httpx.Client,
    store: CosmosStore,
    artifacts: BlobArtifacts,
    agents: AgentFactory,
    pool: str,
) -> None:
    for _ in range(4):
        agents()
    body = run_body(pool, runtime=3)
    body["clients"] = 4
    run_id = api.post("/api/runs", json=body).json()["id"]
    run = wait_state(api, run_id, ("completed", "failed"), timeout=120)
    assert run["state"] == "completed", run["error"]

    items = run["items"]
    assert len(items) == 4 and len({i["agent_id"] for i in items}) == 4  # 4 distinct agents
    results = [r.model_dump(mode="json") for r in store.results.of_run(run_id)]
    assert len(results) == 4
    scheduled = {r["start"]["scheduled_ms"] for r in results}
    assert len(scheduled) == 1  # one common start instant
    skews = [r["start"]["skew_ms"] for r in results]
    # Measured and stored per client; fio's log clock has 1 ms resolution, so a start in the
    # same millisecond as the instant can read as -1.
    assert all(-2 <= s < 1000 for s in skews), skews

    agg = run["aggregate"]
    assert agg["clients"] == 4 and agg["basis"] == "common-window" and not agg["partial"]
    assert agg["start_skew_ms"]["max"] == pytest.approx(max(skews))
    # Recompute from the stored timelines: every client's I/Os inside the time they all
    # ran, over the window's length.
    # Carried in the results (agent protocol 3) or in Blob Storage: as the finalizer reads them.
    carried = [timeline_of(artifacts, r) for r in store.results.of_run(run_id)]
    timelines = [t for t in carried if t is not None]
    assert len(timelines) == len(results)
    window = common_window(timelines)
    assert window is not None
    assert agg["window"] == {
        "start_ms": window[0],
        "end_ms": window[1],
        "seconds": (window[1] - window[0]) / 1000,
    }
    total = sum(totals_in(t, "read", window)[0] for t in timelines)
    assert agg["read"]["iops"] == pytest.approx(total / agg["window"]["seconds"])
    assert sum(c["share"] for c in agg["per_client"]) == pytest.approx(1.0)


def test_step_fails_when_too_few_agents_claim_and_agents_are_released(
    api: httpx.Client, agents: AgentFactory, pool: str
) -> None:
    agents()
    agents()
    body = run_body(pool)
    body.update(clients=3, barrier_timeout_s=5)
    started = time.monotonic()
    run_id = api.post("/api/runs", json=body).json()["id"]
    run = wait_state(api, run_id, ("failed", "completed"), timeout=60)
    elapsed = time.monotonic() - started
    assert run["state"] == "failed"
    assert run["error"] == "2 of 3 clients claimed within 5 s"
    assert run["steps"][0]["failed_reason"] == run["error"]
    assert elapsed < 5 + 10  # the deadline, plus polling and the first claim's delay
    assert all(i["state"] == "failed" for i in run["items"])
    assert run["aggregate"] is None  # nothing reported as if complete

    # Both agents are free again: a 2-client run completes.
    again = run_body(pool)
    again["clients"] = 2
    run2 = api.post("/api/runs", json=again).json()["id"]
    assert wait_state(api, run2, ("completed", "failed"), timeout=60)["state"] == "completed"


def test_client_sweep_over_two_mounts(
    api: httpx.Client, store: CosmosStore, agents: AgentFactory, pool: str, tmp_path: Path
) -> None:
    mounts = {"vol1": str(tmp_path / "vol1"), "vol2": str(tmp_path / "vol2")}
    for d in mounts.values():
        Path(d).mkdir()
    agents(targets=mounts)
    agents(targets=mounts)
    body = run_body(pool)
    body.pop("target")
    body.update(targets=["vol1", "vol2"], clients=[1, 2])
    run_id = api.post("/api/runs", json=body).json()["id"]
    run = wait_state(api, run_id, ("completed", "failed"), timeout=120)
    assert run["state"] == "completed", run["error"]
    assert [s["clients"] for s in run["steps"]] == [1, 2]
    one, two = (s["aggregate"] for s in run["steps"])
    assert one["clients"] == 1 and two["clients"] == 2
    assert two["scaling_efficiency"] == pytest.approx(
        two["read"]["iops"] / (2 * one["read"]["iops"])
    )
    # Steps ran one after the other.
    assert run["steps"][1]["start_at_ms"] > max(
        r.ended_at_ms for r in store.results.of_run(run_id) if r.step == 0
    )
    for r in store.results.of_run(run_id):
        assert [m.alias for m in r.mounts] == ["vol1", "vol2"]
    assert all(list((Path(d) / ".benchsvc").iterdir()) for d in mounts.values())
