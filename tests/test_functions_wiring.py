"""The Azure wiring without the Functions host: Base64 queue messages as a queue trigger
reads them, and the functions function_app.py registers, called with azure.functions
request and timer objects against the real local servers."""

from __future__ import annotations

import asyncio
import base64
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import azure.functions as func
import pytest
from azure.functions.timer import TimerRequest

from adapters.queue import WorkQueues, work_queue_name
from benchctl.localstack import Stack
from core.models import WorkItem, Workload
from functions import context
from tests.conftest import TEAMS_BOT_SECRET_B64, result_from_capture, run_body
from tests.test_bot import card_text, teams_activity, teams_auth

DATA = Path(__file__).parent / "data" / "fio-randrw"


def test_work_item_survives_a_base64_queue(queues: WorkQueues, pool: str) -> None:
    item = WorkItem(
        run_id="r-" + "a" * 32,
        item_id="r-" + "a" * 32 + ".s0.c0",
        step=0,
        client=0,
        clients=1,
        pool=pool,
        targets=["scratch"],
        engine="fio",
        workload=Workload(rw="randrw", bs="8k", iodepth=32, numjobs=4),
    )
    queues.send(item)
    raw = queues.peek_raw(work_queue_name(pool))[0]  # as stored: Base64 text
    body = base64.b64decode(raw, validate=True)
    # What a Functions queue trigger hands to its function after decoding Base64:
    message = func.QueueMessage(id="1", body=body)
    assert WorkItem.model_validate_json(message.get_body()) == item
    assert len(raw) < 2048  # ids and typed fields only, far from the 64 KiB limit


@functools.cache
def registered_functions() -> dict[str, Any]:
    # Indexing twice is refused by the library (as the host does it once).
    import function_app

    return {str(f.get_function_name()): f for f in function_app.app.get_functions()}


def _clear_context() -> None:
    for name in dir(context):
        cached = getattr(context, name)
        if hasattr(cached, "cache_clear"):
            cached.cache_clear()


@pytest.fixture
def app_functions(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for key, value in stack.env().items():
        monkeypatch.setenv(key, value)
    _clear_context()
    yield registered_functions()
    _clear_context()


def call_http(
    fns: dict[str, Any],
    method: str,
    url: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> func.HttpResponse:
    handler = fns["http_app_func"].get_user_function()
    raw = (
        body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else b""
    )
    req = func.HttpRequest(
        method=method,
        url=f"http://localhost{url}",
        headers={"content-type": "application/json", **(headers or {})},
        body=raw,
    )
    response: func.HttpResponse = asyncio.run(handler(req, None))
    return response


def test_registered_functions(app_functions: dict[str, Any], pool: str) -> None:
    fns = app_functions
    assert set(fns) == {"http_app_func", "advance_runs", "start_scheduled_runs"}
    trigger = fns["advance_runs"].get_trigger()
    assert trigger.get_dict_repr()["type"] == "timerTrigger"

    bad = call_http(fns, "POST", "/api/runs", {"target": "/mnt/x", "pool": pool})
    assert bad.status_code == 400
    assert json.loads(bad.get_body())["errors"][0]["field"] == "target"

    created = call_http(fns, "POST", "/api/runs", run_body(pool))
    assert created.status_code == 202
    run_id = json.loads(created.get_body())["id"]
    assert created.headers["Location"] == f"/api/runs/{run_id}"

    # Store a result for the run's item, built from real fio output, through the function,
    # as the agent holding the item (claimed and ready first).
    item = context.current().store.items.get_item(run_id, f"{run_id}.s0.c0").work_item
    ref = {"run_id": run_id, "item_id": item.item_id, "agent_id": "fn-test"}
    claim = {**ref, "work_item": item.model_dump(mode="json"), "dequeue_count": 1}
    del claim["run_id"], claim["item_id"]
    claimed = call_http(fns, "POST", "/api/agent/claim", claim)
    assert json.loads(claimed.get_body())["action"] == "run"
    ready = call_http(fns, "POST", "/api/agent/ready", ref)
    assert json.loads(ready.get_body())["status"] == "go"
    doc = json.loads((DATA / "fio.json").read_text())
    result = result_from_capture(item, "fn-test")
    stored = call_http(fns, "PUT", f"/api/agent/results/{item.item_id}", result)
    assert stored.status_code == 201
    again = call_http(fns, "PUT", f"/api/agent/results/{item.item_id}", result)
    assert again.status_code == 200 and json.loads(again.get_body())["duplicate"] is True

    # The runs timer aggregates the finished run and marks it completed.
    fns["advance_runs"].get_user_function()(TimerRequest(past_due=False))
    # The schedules timer runs too (whatever schedules other tests left are idempotent).
    fns["start_scheduled_runs"].get_user_function()(TimerRequest(past_due=False))
    run = json.loads(call_http(fns, "GET", f"/api/runs/{run_id}").get_body())
    assert run["state"] == "completed"
    assert run["aggregate"]["clients"] == 1
    assert run["aggregate"]["read"]["total_ios"] == doc["jobs"][0]["read"]["total_ios"]


def test_azure_wiring_signs_in_through_easyauth_and_serves_the_bot(
    app_functions: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As configured by the Bicep: the principal header decides; the bot route checks HMAC."""
    monkeypatch.setenv("BENCH_TRUST_EASYAUTH", "1")
    monkeypatch.setenv("BENCH_TEAMS_BOT_SECRET", TEAMS_BOT_SECRET_B64)
    _clear_context()
    fns = app_functions
    assert call_http(fns, "GET", "/api/runs").status_code == 401
    principal = base64.b64encode(
        json.dumps({"claims": [{"typ": "roles", "val": "Bench.Reader"}]}).encode()
    ).decode()
    signed_in = {"x-ms-client-principal": principal, "x-ms-client-principal-name": "ada"}
    assert call_http(fns, "GET", "/api/runs", headers=signed_in).status_code == 200
    body = teams_activity("help")
    reply = call_http(fns, "POST", "/api/bot/teams", body, headers=teams_auth(body))
    assert reply.status_code == 200
    assert "run <profile> on <target>" in card_text(json.loads(reply.get_body()))
    flipped = body.replace(b"help", b"hel p")
    assert (
        call_http(fns, "POST", "/api/bot/teams", flipped, headers=teams_auth(body)).status_code
        == 401
    )
