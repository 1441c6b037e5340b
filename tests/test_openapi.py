"""The OpenAPI document tells the truth (issue 12, point 7).

Three ways: the document's own structure (every reference resolves, every body and answer
is described, no 422), real answers of every operation checked against it
(tests/openapi_checks.py), and Schemathesis fuzzing every operation of the session's local
stack (tests/test_openapi_fuzz.py).
"""

from __future__ import annotations

import gzip
import json
import re
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from adapters.cosmos import CosmosStore
from core.monitoring.notify import sign, teams_signature
from core.validation import schema_path
from tests.bot_world import World, activity, press
from tests.conftest import (
    BOT_SECRET,
    FUZZ_AGENT_POOL,
    FUZZ_POOL,
    FUZZ_TARGET,
    TEAMS_BOT_SECRET_B64,
    result_from_capture,
    run_body,
    wait_state,
)
from tests.openapi_checks import Checker, operations, refs, resolved
from tests.test_api_inputs import BODY_OPERATIONS

ROOT = Path(__file__).resolve().parent.parent
BINARY = {"type": "string", "format": "binary"}
HTML_PAGES = ("/api/runs/{run_id}/report", "/api/series/{key}/report", "/api/compare/report")
DOWNLOADS = ("/api/admin/export/artifacts/{run_id}/{owner}/{name}",)  # gzip bytes


@pytest.fixture
def document(openapi_document: dict[str, Any]) -> dict[str, Any]:
    return openapi_document


def test_every_reference_resolves_inside_the_document(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    found = refs(document)
    assert found and all(r.startswith("#/components/schemas/") for r in found)
    assert {r.rsplit("/", 1)[1] for r in found} <= set(schemas)
    assert not any("$defs" in json.dumps(s) for s in schemas.values())
    assert "HTTPValidationError" not in schemas


def annotated(schema: Any) -> Any:
    """``schema`` without ``"default": null``, an annotation FastAPI's OpenAPI writer leaves
    out (it drops null values); what validates is the same."""
    if isinstance(schema, dict):
        return {k: annotated(v) for k, v in schema.items() if not (k == "default" and v is None)}
    if isinstance(schema, list):
        return [annotated(v) for v in schema]
    return schema


def test_run_request_body_is_the_contract_the_api_validates(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    body = document["paths"]["/api/runs"]["post"]["requestBody"]["content"]["application/json"]
    contract = json.loads(schema_path("run-request").read_text())
    for key in ("$schema", "$id"):
        contract.pop(key)
    expected = annotated(resolved(contract, contract["$defs"]))
    assert resolved(body["schema"], schemas) == expected


def test_the_document_refuses_what_the_server_refuses(document: dict[str, Any]) -> None:
    """Valid by the document and refused by the server, before issue 24.5: an empty cron,
    {"target": null, "targets": []}, any continuation token; and a sweep of 17 steps,
    metadata phases out of order (found by Schemathesis' positive_data_acceptance)."""
    schemas = document["components"]["schemas"]

    def body_of(path: str, method: str) -> Draft202012Validator:
        content = document["paths"][path][method]["requestBody"]["content"]
        return Draft202012Validator(resolved(content["application/json"]["schema"], schemas))

    runs = body_of("/api/runs", "post")
    refused: list[dict[str, Any]] = [
        {"target": None, "targets": []},
        {},
        {"target": "a", "targets": ["b"]},
        {"targets": ["a", "a"]},
        {"target": "a", "clients": list(range(1, 18))},
        {"target": "a", "workload": {"metadata": {"ops": ["stat", "delete"]}}},
        {"target": "a", "workload": {"metadata": {"ops": ["create", "delete"], "op": "open"}}},
        {"target": "a", "sweep": {"field": "iodepth", "values": ["4k"]}},
        {"target": "a", "sweep": {"rate_pct": [0]}},
    ]
    for bad in refused:
        assert not runs.is_valid(bad), bad
    for good in ({"target": "a"}, {"targets": ["a", "b"]}, {"target": None, "targets": ["a"]}):
        assert runs.is_valid(good), good
    schedules = body_of("/api/schedules", "post")
    template = {"request": {"target": "a"}, "owner": "o"}
    for cron in ("", " ", "* * *", "@reboot", "@A"):
        assert not schedules.is_valid({**template, "cron": cron}), cron
    assert schedules.is_valid({**template, "cron": "0 3 * * *"})
    assert not body_of("/api/schedules/{schedule_id}", "patch").is_valid({"cron": ""})
    (continuation,) = [
        p
        for p in document["paths"]["/api/runs"]["get"]["parameters"]
        if p["name"] == "continuation"
    ]
    token = Draft202012Validator(continuation["schema"])
    assert not token.is_valid("not a token") and token.is_valid("bWVtb3J5LXBhZ2U6Mg==")
    for listing in ("/api/runs", "/api/admin/export/runs"):
        (given,) = [
            p
            for p in document["paths"][listing]["get"]["parameters"]
            if p["name"] == "continuation"
        ]
        assert given["schema"] == continuation["schema"], listing
        assert "404" in document["paths"][listing]["get"]["responses"], listing


def test_every_body_and_answer_is_described(document: dict[str, Any]) -> None:
    with_body = set()
    for method, path, op in operations(document):
        answers = op["responses"]
        assert "422" not in answers, (method, path)
        for code, answer in answers.items():
            assert re.fullmatch(r"[1-5][0-9][0-9]", code), (method, path, code)
            if code == "204":
                assert "content" not in answer
                continue
            if path in HTML_PAGES and code == "200":  # a report: one HTML page
                assert answer["content"] == {"text/html": {"schema": {"type": "string"}}}
                continue
            if path in DOWNLOADS and code == "200":
                assert answer["content"] == {"application/gzip": {"schema": BINARY}}
                continue
            schema = answer["content"]["application/json"]["schema"]
            assert set(schema) == {"$ref"}, (method, path, code)
            if code >= "400" and path != "/api/health":  # health answers 503 with its checks
                assert schema["$ref"].endswith("/ErrorBody"), (method, path, code)
        if method in ("post", "put", "patch"):
            body = op["requestBody"]
            assert body["required"] and len(body["content"]) == 1
            if "application/json" in body["content"]:
                assert set(body["content"]["application/json"]["schema"]) == {"$ref"}
                with_body.add((method.upper(), path))
            else:  # an artifact: gzip bytes
                assert body["content"] == {"application/gzip": {"schema": BINARY}}
        if op.get("parameters") or method in ("post", "put", "patch"):
            assert "400" in answers, (method, path)
        if op["security"]:
            assert "401" in answers, (method, path)
        else:
            assert path in ("/api/health",)
    assert {("POST", "/api/bot/teams"), ("POST", "/api/runs")} <= with_body
    templates = {(m, _template(u)) for m, u in BODY_OPERATIONS}
    chat = {(m, p) for m, p in with_body if p.startswith("/api/bot/") or p == "/api/messages"}
    assert templates == with_body - chat


def _template(url: str) -> str:
    url = re.sub(r"/import/runs/r-[^/]+$", "/import/runs/{run_id}", url)
    url = re.sub(r"/results/r-[^/]+$", "/results/{item_id}", url)
    url = re.sub(r"/schedules/sch-[^/]+$", "/schedules/{schedule_id}", url)
    url = re.sub(r"/targets/[^/]+/clean$", "/targets/{alias}/clean", url)
    return re.sub(r"/regressions/[0-9a-f]{16}/[^/]+$", "/regressions/{key}/{regression_id}", url)


def test_sign_in_is_documented(document: dict[str, Any]) -> None:
    ops = {(m, p): op for m, p, op in operations(document)}
    assert ops[("post", "/api/bot/teams")]["security"] == [{"TeamsHmac": []}]
    assert ops[("post", "/api/bot/webhook")]["security"] == [
        {"WebhookSignature": [], "WebhookTimestamp": []}
    ]
    assert ops[("post", "/api/messages")]["security"] == [{"BotToken": []}]
    assert ops[("get", "/api/runs")]["security"] == [{"ApiKey": []}, {"EntraId": []}]
    assert "403" in ops[("post", "/api/agent/claim")]["responses"]
    assert "409" in ops[("post", "/api/agent/ready")]["responses"]
    assert set(document["components"]["securitySchemes"]) == {
        "ApiKey",
        "BotToken",
        "EntraId",
        "TeamsHmac",
        "WebhookSignature",
        "WebhookTimestamp",
    }


def test_real_answers_of_every_operation_match_the_document(
    document: dict[str, Any], api: httpx.Client, store: CosmosStore, pool: str, bot_world: World
) -> None:
    check = Checker(document)
    # A run taken through the agents' protocol with a result fio wrote here.
    accepted = check(api.post("/api/runs", json=run_body(pool)), "/api/runs")
    run_id = accepted["id"]
    item_id = f"{run_id}.s0.c0"
    item = store.items.get_item(run_id, item_id).work_item
    ref = {"agent_id": "conformance", "run_id": run_id, "item_id": item_id}
    claim = {"agent_id": "conformance", "work_item": item.model_dump(mode="json")}
    claimed = check(
        api.post("/api/agent/claim", json={**claim, "dequeue_count": 1}), "/api/agent/claim"
    )
    assert claimed["action"] == "run"
    assert check(api.post("/api/agent/ready", json=ref), "/api/agent/ready")["status"] == "go"
    check(api.post("/api/agent/barrier", json=ref), "/api/agent/barrier")
    check(api.post("/api/agent/heartbeat", json=ref), "/api/agent/heartbeat")
    second_ms = {"end_ms": 1_800_000_001_000, "dur_ms": 1000}
    beat = {**ref, "live": [{**second_ms, "read": {"ios": 9, "bytes": 36864, "lat_mean_ns": 1.5}}]}
    check(api.post("/api/agent/heartbeat", json=beat), "/api/agent/heartbeat")
    live = check(api.get(f"/api/runs/{run_id}/live"), "/api/runs/{run_id}/live")
    assert live["clients"][0]["seconds"][0]["live_iops"] == 9
    check(api.get(f"/api/runs/{run_id}/live", params={"seconds": 0}), "/api/runs/{run_id}/live")
    artifact = "/api/agent/artifacts/{item_id}/{name}"
    packed = gzip.compress(json.dumps({"fio": "output"}).encode())
    put = f"/api/agent/artifacts/{item_id}/raw?agent_id=conformance"
    assert check(api.put(put, content=packed), artifact)["bytes"] == len(packed)
    check(api.put(put.replace("/raw?", "/bogus?"), content=packed), artifact)  # 400
    result = result_from_capture(item, "conformance")
    put = f"/api/agent/results/{item_id}"
    assert check(api.put(put, json=result), "/api/agent/results/{item_id}")["duplicate"] is False
    assert check(api.put(put, json=result), "/api/agent/results/{item_id}")["duplicate"] is True
    wait_state(api, run_id, ("completed",), timeout=60)
    run = check(api.get(f"/api/runs/{run_id}"), "/api/runs/{run_id}")
    assert run["aggregate"]["clients"] == 1 and run["items"][0]["result"]["read"]["iops"] > 0
    check(api.get(f"/api/runs/{run_id}/curves"), "/api/runs/{run_id}/curves")
    check(api.get(f"/api/runs/{run_id}/results/{item_id}"), "/api/runs/{run_id}/results/{item_id}")
    check(api.get("/api/runs", params={"limit": 200}), "/api/runs")
    check(api.get("/api/compare", params={"a": run_id, "b": run_id}), "/api/compare")
    compared = "/api/compare/report"
    check(api.get(compared, params={"run": [run_id, run_id]}), compared)
    check(api.get(compared, params={"run": [run_id]}), compared)  # 400: at least two
    listed = check(api.get("/api/series"), "/api/series")["series"]
    assert listed
    key = listed[0]["series_key"]
    check(api.get(f"/api/series/{key}"), "/api/series/{key}")
    regressions = check(api.get("/api/regressions"), "/api/regressions")["regressions"]
    triage = "/api/regressions/{key}/{regression_id}"
    reg = (
        regressions[0]
        if regressions
        else {"series_key": key, "id": f"{key}.read.iops.gate.{run_id}"}
    )
    url = f"/api/regressions/{reg['series_key']}/{reg['id']}"
    check(api.patch(url, json={"state": "bogus"}), triage)  # 400
    check(api.patch(url, json={"state": reg.get("state", "new")}), triage)  # 200, or 404
    check(api.get("/api/targets"), "/api/targets")
    clean = "/api/targets/{alias}/clean"
    check(api.post(f"/api/targets/{FUZZ_TARGET}/clean", json={"pool": FUZZ_POOL}), clean)
    check(api.post("/api/targets/nosuch/clean", json={}), clean)  # 404
    # The registry: a registration (its own pool: no test runs there), the listing, errors.
    agent_reg = {"agent_id": "conformance", "pool": FUZZ_AGENT_POOL, "session": "c" * 32}
    check(api.post("/api/agent/register", json=agent_reg), "/api/agent/register")
    unknown_pool = {**agent_reg, "pool": "nosuch"}
    check(api.post("/api/agent/register", json=unknown_pool), "/api/agent/register")  # 400
    check(api.get("/api/agents"), "/api/agents")
    check(api.get("/api/agents", params={"pool": "Bad!"}), "/api/agents")  # 400
    check(api.get("/api/profiles"), "/api/profiles")
    check(api.get("/api/profiles/smoke-randread-4k"), "/api/profiles/{name}")
    check(api.get("/api/health"), "/api/health")

    # A second run: a failed attempt, a cancelled one, the run cancelled.
    second = check(api.post("/api/runs", json=run_body(pool)), "/api/runs")["id"]
    item2 = store.items.get_item(second, f"{second}.s0.c0").work_item
    ref2 = {**ref, "run_id": second, "item_id": item2.item_id}
    claim2 = {**claim, "work_item": item2.model_dump(mode="json"), "dequeue_count": 1}
    check(api.post("/api/agent/claim", json=claim2), "/api/agent/claim")
    failed = {**ref2, "message": "fio exited 1"}
    check(api.post("/api/agent/failure", json=failed), "/api/agent/failure")
    check(api.post("/api/agent/cancelled", json=ref2), "/api/agent/cancelled")
    check(api.delete(f"/api/runs/{second}"), "/api/runs/{run_id}")

    # Schedules: create (disabled, so it never fires), read, list, change, delete.
    template = run_body(pool)
    sched = {"cron": "0 3 * * *", "owner": "conformance", "enabled": False, "request": template}
    created = check(api.post("/api/schedules", json=sched), "/api/schedules")
    url = f"/api/schedules/{created['id']}"
    check(api.get(url), "/api/schedules/{schedule_id}")
    check(api.get("/api/schedules"), "/api/schedules")
    check(api.patch(url, json={"name": "nightly"}), "/api/schedules/{schedule_id}")
    check(api.delete(url), "/api/schedules/{schedule_id}")
    check(api.get(url), "/api/schedules/{schedule_id}")  # 404

    # Errors, in their shape.
    check(api.post("/api/runs", json={"target": "/mnt"}), "/api/runs")
    check(api.get("/api/runs", params={"continuation": "abc"}), "/api/runs")
    check(
        api.post("/api/agent/ready", json={**ref, "item_id": f"{run_id}.s9.c0"}), "/api/agent/ready"
    )
    busy = {**run_body(FUZZ_POOL), "target": FUZZ_TARGET, "on_busy": "refuse"}
    first = api.post("/api/runs", json=busy)
    check(first, "/api/runs")
    check(api.post("/api/runs", json=busy), "/api/runs")  # 409 while the first holds it
    if first.status_code == 202:  # else a run of Schemathesis' held the target already: a 409
        api.delete(f"/api/runs/{first.json()['id']}")

    # The chat doors, signed.
    now = datetime.now(UTC).isoformat()
    raw = json.dumps({"id": str(uuid.uuid4()), "timestamp": now, "text": "help"}).encode()
    headers = {"Authorization": f"HMAC {teams_signature(raw, TEAMS_BOT_SECRET_B64)}"}
    check(api.post("/api/bot/teams", content=raw, headers=headers), "/api/bot/teams")
    check(api.post("/api/bot/teams", content=raw), "/api/bot/teams")  # 401
    raw = json.dumps({"text": "profiles", "user": "conformance"}).encode()
    headers = sign(raw, secret=BOT_SECRET.encode(), timestamp=int(time.time()))
    check(api.post("/api/bot/webhook", content=raw, headers=headers), "/api/bot/webhook")
    check(api.post("/api/bot/webhook", content=raw, headers=headers), "/api/bot/webhook")  # 409
    # The Teams bot: a message (202), a card's button (200, the new card), no token (401),
    # a replay (409), an invoke it has no route for (400).
    said = activity(bot_world, text="help")
    bearer = {"Authorization": f"Bearer {bot_world.token()}"}
    check(api.post("/api/messages", json=said, headers=bearer), "/api/messages")
    check(api.post("/api/messages", json=said, headers=bearer), "/api/messages")
    check(api.post("/api/messages", json=press(bot_world, "form"), headers=bearer), "/api/messages")
    check(api.post("/api/messages", json=said), "/api/messages")
    other = {**activity(bot_world, type_="invoke"), "name": "task/fetch", "value": {}}
    check(api.post("/api/messages", json=other, headers=bearer), "/api/messages")

    # Whatever else the session's tests left: every run, its curves, every series.
    listed_runs = check(api.get("/api/runs", params={"limit": 200}), "/api/runs")["runs"]
    for n, listed_run in enumerate(listed_runs):
        url = f"/api/runs/{listed_run['id']}"
        for one_item in check(api.get(url), "/api/runs/{run_id}")["items"]:
            if one_item["result"]:
                got = api.get(f"{url}/results/{one_item['id']}")
                check(got, "/api/runs/{run_id}/results/{item_id}")
        check(api.get(f"{url}/curves"), "/api/runs/{run_id}/curves")
        if n < 3:  # reports build every chart: a few are enough
            check(api.get(f"{url}/report"), "/api/runs/{run_id}/report")
    for n, one in enumerate(check(api.get("/api/series"), "/api/series")["series"]):
        check(api.get(f"/api/series/{one['series_key']}"), "/api/series/{key}")
        if n < 3:
            check(api.get(f"/api/series/{one['series_key']}/report"), "/api/series/{key}/report")
    check(api.get("/api/series/0000000000000000/report"), "/api/series/{key}/report")  # 404
    check(api.get("/api/runs/r-0/report"), "/api/runs/{run_id}/report")  # 400

    # The admin's moves and deletes (the local stack is open: its caller is an admin).
    runs = check(api.get("/api/admin/export/runs", params={"limit": 5}), "/api/admin/export/runs")
    assert run_id in runs["runs"] or runs["continuation"]
    bundle = check(api.get(f"/api/admin/export/runs/{run_id}"), "/api/admin/export/runs/{run_id}")
    art = "/api/admin/export/artifacts/{run_id}/{owner}/{name}"
    got = check(api.get(f"/api/admin/export/artifacts/{run_id}/{item_id}/raw"), art)
    assert got == packed
    check(api.get(f"/api/admin/export/artifacts/{run_id}/{item_id}/logs"), art)  # 404
    check(api.get("/api/admin/export/schedules"), "/api/admin/export/schedules")
    imported = "/api/admin/import/runs/{run_id}"
    again = {"run": bundle["run"], "documents": [], "commit": True}
    assert (
        check(api.post(f"/api/admin/import/runs/{run_id}", json=again), imported)["existing"] == 1
    )
    check(api.post(f"/api/admin/import/runs/{run_id}", json={"run": {}, "commit": True}), imported)
    check(
        api.post("/api/admin/import/schedules", json={"schedules": []}),
        "/api/admin/import/schedules",
    )
    check(
        api.post("/api/admin/import/schedules", json={"schedules": [1]}),
        "/api/admin/import/schedules",
    )
    put_art = "/api/admin/import/artifacts/{run_id}/{owner}/{name}"
    check(api.put(f"/api/admin/import/artifacts/{run_id}/{item_id}/raw", content=packed), put_art)
    check(
        api.put(f"/api/admin/import/artifacts/{run_id}/r-{'1' * 32}.s0/raw", content=packed),
        put_art,
    )
    check(api.delete(f"/api/admin/runs/{second}"), "/api/admin/runs/{run_id}")  # 200 or 409
    check(api.delete(f"/api/admin/runs/{run_id}"), "/api/admin/runs/{run_id}")
    check(api.delete(f"/api/admin/runs/{run_id}"), "/api/admin/runs/{run_id}")  # 404
    check(api.delete("/api/admin/series/0000000000000000"), "/api/admin/series/{series_key}")

    methods_seen = {(m, t) for m, t, _ in check.seen}
    every = {(m, p) for m, p, _ in operations(document)}
    assert every - methods_seen == set()
