"""The HTTP API against the real Azurite queue and the Cosmos DB stand-in."""

from __future__ import annotations

import httpx

from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues, work_queue_name
from tests.conftest import run_body


def queued(queues: WorkQueues, pool: str) -> int:
    return queues.approximate_count(work_queue_name(pool))


def test_bad_request_names_each_field_and_writes_nothing(
    api: httpx.Client, queues: WorkQueues, store: CosmosStore, pool: str
) -> None:
    before = len(api.get("/api/runs", params={"limit": 200}).json()["runs"])
    body = {
        "target": "/mnt/scratch",
        "pool": pool,
        "workload": {"rw": "randfoo", "bs": "4x", "iodepth": 0},
        "priority": "high",
    }
    r = api.post("/api/runs", json=body)
    assert r.status_code == 400
    fields = {e["field"] for e in r.json()["errors"]}
    assert fields == {"target", "workload.rw", "workload.bs", "workload.iodepth", "priority"}
    assert queued(queues, pool) == 0
    assert len(api.get("/api/runs", params={"limit": 200}).json()["runs"]) == before


def test_unknown_pool_and_bad_json_are_400(api: httpx.Client) -> None:
    r = api.post("/api/runs", json={"target": "scratch", "pool": "nosuchpool"})
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "pool"
    r = api.post("/api/runs", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "JSON" in r.json()["errors"][0]["message"]


def test_accepted_run_is_recorded_and_enqueued(
    api: httpx.Client, queues: WorkQueues, pool: str
) -> None:
    r = api.post("/api/runs", json=run_body(pool))
    assert r.status_code == 202
    run_id = r.json()["id"]
    assert r.headers["Location"] == f"/api/runs/{run_id}"
    assert queued(queues, pool) == 1
    run = api.get(f"/api/runs/{run_id}").json()
    assert run["state"] == "queued" and run["items"][0]["state"] == "queued"
    assert run["request"]["workload"]["bs"] == "4k" and run["tags"] == {"test": "yes"}


def test_idempotency_key_returns_the_same_run_and_enqueues_once(
    api: httpx.Client, queues: WorkQueues, pool: str
) -> None:
    key = {"Idempotency-Key": f"ci-{pool}-build-42"}
    first = api.post("/api/runs", json=run_body(pool), headers=key)
    again = api.post("/api/runs", json=run_body(pool), headers=key)
    assert first.status_code == 202 and again.status_code == 200
    assert first.json()["id"] == again.json()["id"]
    assert queued(queues, pool) == 1
    other = api.post("/api/runs", json=run_body(pool, bs="8k"), headers=key)
    assert other.status_code == 409
    assert queued(queues, pool) == 1


def test_list_filters_and_pages(api: httpx.Client, pool: str) -> None:
    ids = []
    for i in range(3):
        body = run_body(pool)
        body["tags"] = {"pipeline": f"{pool}-p{i % 2}"}
        ids.append(api.post("/api/runs", json=body).json()["id"])
    tagged = api.get("/api/runs", params={"tag": f"pipeline={pool}-p0"}).json()["runs"]
    assert {r["id"] for r in tagged} == {ids[0], ids[2]}
    page1 = api.get("/api/runs", params={"tag": f"pipeline={pool}-p0", "limit": 1}).json()
    assert len(page1["runs"]) == 1 and page1["runs"][0]["id"] == ids[2]  # newest first
    page2 = api.get(
        "/api/runs",
        params={"tag": f"pipeline={pool}-p0", "limit": 1, "continuation": page1["continuation"]},
    ).json()
    assert [r["id"] for r in page2["runs"]] == [ids[0]]
    # One run at a time per target: the first is queued, the others wait in line.
    queued_runs = api.get("/api/runs", params={"state": "queued", "limit": 200}).json()["runs"]
    assert ids[0] in {r["id"] for r in queued_runs}
    waiting = api.get("/api/runs", params={"state": "waiting", "limit": 200}).json()["runs"]
    assert {ids[1], ids[2]} <= {r["id"] for r in waiting}
    assert [api.get(f"/api/runs/{i}").json()["queue_position"] for i in ids[1:]] == [1, 2]
    bad = api.get("/api/runs", params={"state": "sleeping", "limit": 0, "tag": "novalue"})
    assert bad.status_code == 400
    assert {e["field"] for e in bad.json()["errors"]} == {"state", "limit", "tag"}


def test_cancel_queued_run(api: httpx.Client, pool: str) -> None:
    run_id = api.post("/api/runs", json=run_body(pool)).json()["id"]
    r = api.delete(f"/api/runs/{run_id}")
    assert r.status_code == 202 and r.json()["state"] == "cancelled"
    run = api.get(f"/api/runs/{run_id}").json()
    assert run["items"][0]["state"] == "cancelled"
    assert api.get("/api/runs/r-00000000000000000000000000000000").status_code == 404


def test_health_and_openapi(api: httpx.Client) -> None:
    assert api.get("/api/health").json()["status"] == "ok"
    spec = api.get("/api/openapi.json").json()
    assert "/api/runs" in spec["paths"] and "/api/runs/{run_id}" in spec["paths"]
    body_schema = spec["paths"]["/api/runs"]["post"]["requestBody"]["content"]["application/json"][
        "schema"
    ]
    # The body names a component of the document itself (no dangling $defs references).
    name = body_schema["$ref"].removeprefix("#/components/schemas/")
    properties = spec["components"]["schemas"][name]["properties"]
    assert {"target", "targets", "clients", "workload"} <= set(properties)
