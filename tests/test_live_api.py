"""The live endpoint and the heartbeat's live samples at the API's edges (issue 26.5): bad
input is a 4xx naming the field and keeps nothing; a long run's samples stay within their
ring in Cosmos DB. The test plays the agent itself (claim, ready, heartbeats) against the
real API: no fio needed to send hundreds of seconds."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import httpx

from adapters.cosmos import CosmosStore
from core.models.live import LIVE_RING
from core.runs.live import MAX_SAMPLES_PER_BEAT
from tests.conftest import run_body, wait_until

AGENT = "live-agent-1"


def sample(end_ms: int, ios: int = 500) -> dict[str, Any]:
    return {
        "end_ms": end_ms,
        "dur_ms": 1000,
        "read": {"ios": ios, "bytes": ios * 4096, "lat_mean_ns": 2490.0},
    }


def held_item(api: httpx.Client, store: CosmosStore, pool: str) -> dict[str, str]:
    """A run of one client whose item this test holds, ready (its start instant set)."""
    run_id = api.post("/api/runs", json=run_body(pool)).json()["id"]
    item = store.items.get_item(run_id, f"{run_id}.s0.c0").work_item
    claim = {
        "work_item": item.model_dump(mode="json"),
        "agent_id": AGENT,
        "dequeue_count": 1,
        "message_id": "m-live",
    }
    assert api.post("/api/agent/claim", json=claim).json()["action"] == "run"
    ref = {"run_id": run_id, "item_id": item.item_id, "agent_id": AGENT}
    assert api.post("/api/agent/ready", json=ref).json()["status"] == "go"
    return ref


def fields(r: httpx.Response) -> set[str]:
    return {e["field"] for e in r.json()["errors"]}


def test_a_long_run_keeps_one_document_of_at_most_its_ring(
    api: httpx.Client, store: CosmosStore, pool: str
) -> None:
    ref = held_item(api, store, pool)
    t0 = 1_800_000_000_000
    ring: deque[dict[str, Any]] = deque(maxlen=MAX_SAMPLES_PER_BEAT)  # as agent.live keeps it
    for beat in range(100):  # 400 seconds, 4 new in each beat (as after an API outage)
        ring.extend(sample(t0 + 1000 * (4 * beat + k)) for k in range(4))
        r = api.post("/api/agent/heartbeat", json={**ref, "live": list(ring)})
        assert r.status_code == 200, r.text
    docs = store.container("live").query(
        "SELECT * FROM c WHERE c.run_id = @r", [{"name": "@r", "value": ref["run_id"]}]
    )
    assert len(docs) == 1
    stored = docs[0]
    ends = [s["end_ms"] for s in stored["samples"]]
    assert ends == [t0 + 1000 * k for k in range(400 - LIVE_RING, 400)]
    size = len(json.dumps({k: v for k, v in stored.items() if not k.startswith("_")}))
    assert size < 8_000, size  # far below Cosmos DB's 2 MB, whatever the run's length
    assert len(json.dumps({**ref, "live": list(ring)})) < 8_000  # and a heartbeat's body

    view = api.get(f"/api/runs/{ref['run_id']}/live").json()
    assert view["step"] == 0 and view["step_clients"] == 1 and len(view["clients"]) == 1
    assert len(view["clients"][0]["seconds"]) == LIVE_RING
    assert {s["live_iops"] for s in view["clients"][0]["seconds"]} == {500.0}
    assert view["clients"][0]["agent_id"] == AGENT
    few = api.get(f"/api/runs/{ref['run_id']}/live", params={"seconds": 3, "step": 0}).json()
    assert len(few["clients"][0]["seconds"]) == 3


def test_bad_live_input_is_a_4xx_naming_the_field_and_keeps_nothing(
    api: httpx.Client, store: CosmosStore, pool: str
) -> None:
    ref = held_item(api, store, pool)
    run_id = ref["run_id"]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"live": [sample(1000 * k) for k in range(1, MAX_SAMPLES_PER_BEAT + 2)]}, "live"),
        ({"live": [{**sample(1000), "read": {"ios": -1, "bytes": 0}}]}, "live.0.read.ios"),
        ({"live": [{**sample(1000), "dur_ms": 0}]}, "live.0.dur_ms"),
        ({"live": [{**sample(1000), "trim": {"ios": 1, "bytes": 1}}]}, "live.0.trim"),
        ({"live": [{**sample(1000), "end_ms": "soon"}]}, "live.0.end_ms"),
        ({"live": {"end_ms": 1000}}, "live"),
    ]
    for extra, field in cases:
        r = api.post("/api/agent/heartbeat", json={**ref, **extra})
        assert r.status_code == 400, (extra, r.text)
        assert field in fields(r), (extra, r.json())
    # Another agent's samples for this item: refused as its heartbeat is.
    forged = {**ref, "agent_id": "someone-else", "live": [sample(1000)]}
    assert api.post("/api/agent/heartbeat", json=forged).status_code == 409
    assert (
        store.container("live").query(
            "SELECT * FROM c WHERE c.run_id = @r", [{"name": "@r", "value": run_id}]
        )
        == []
    )
    assert api.get(f"/api/runs/{run_id}/live").json()["clients"] == []

    gets: list[tuple[str, dict[str, int | str], int, str]] = [
        ("/api/runs/not-a-run/live", {}, 400, "run_id"),
        (f"/api/runs/r-{'0' * 32}/live", {}, 404, "(path)"),
        (f"/api/runs/{run_id}/live", {"step": 7}, 404, "step"),
        (f"/api/runs/{run_id}/live", {"step": -1}, 400, "step"),
        (f"/api/runs/{run_id}/live", {"seconds": 0}, 400, "seconds"),
        (f"/api/runs/{run_id}/live", {"seconds": LIVE_RING + 1}, 400, "seconds"),
        (f"/api/runs/{run_id}/live", {"seconds": "all"}, 400, "seconds"),
    ]
    for path, params, status, field in gets:
        r = api.get(path, params=params)
        assert r.status_code == status, (path, params, r.text)
        assert field in fields(r), (path, params, r.json())
    assert api.get("/ui/runs/not-a-run/live").status_code == 400
    assert api.get(f"/ui/runs/r-{'0' * 32}/live").status_code == 404


def test_a_step_that_has_not_measured_yet_has_no_live_figures(
    api: httpx.Client, store: CosmosStore, pool: str
) -> None:
    """Queued (no agent in its pool yet): the view says so, it is not an error."""
    run_id = api.post("/api/runs", json=run_body(pool)).json()["id"]
    view = wait_until(lambda: api.get(f"/api/runs/{run_id}/live").json(), 10)
    assert view["state"] in ("queued", "waiting") and view["step"] is None
    assert view["clients"] == [] and view["total"] == [] and view["latency"] == "total"
    assert api.get(f"/api/runs/{run_id}/live", params={"step": 0}).json()["clients"] == []
    api.delete(f"/api/runs/{run_id}")


def test_the_document_labels_the_live_operation_and_its_figures_live(
    openapi_document: dict[str, Any],
) -> None:
    doc = openapi_document
    op = doc["paths"]["/api/runs/{run_id}/live"]["get"]
    assert op["tags"] == ["live"] and "Live:" in op["description"]
    assert {p["name"] for p in op["parameters"]} == {"run_id", "step", "seconds"}
    schemas = doc["components"]["schemas"]
    figures = [n for n in schemas["LiveSecond"]["properties"] if n not in ("read", "write")]
    assert figures == ["start_ms", "end_ms", "live_iops", "live_mib_s", "live_lat_mean_ns"]
    assert "total latency" in schemas["LiveSecond"]["properties"]["live_lat_mean_ns"]["description"]
    beat = schemas["HeartbeatBody"]["properties"]["live"]
    assert beat["maxItems"] == MAX_SAMPLES_PER_BEAT and "live" in beat["description"]
