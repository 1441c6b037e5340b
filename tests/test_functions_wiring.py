"""The Azure wiring without the Functions host: Base64 queue messages as a queue trigger
reads them, and the functions function_app.py registers, called with azure.functions
request and timer objects against the real local servers."""

from __future__ import annotations

import asyncio
import base64
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
from tests.conftest import result_from_capture, run_body

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


@pytest.fixture
def app_functions(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    for key, value in stack.env().items():
        monkeypatch.setenv(key, value)
    for cached in (context.settings, context.store, context.queues, context.service):
        cached.cache_clear()
    import function_app

    fns = {str(f.get_function_name()): f for f in function_app.app.get_functions()}
    yield fns
    for cached in (context.settings, context.store, context.queues, context.service):
        cached.cache_clear()


def call_http(fns: dict[str, Any], method: str, url: str, body: Any = None) -> func.HttpResponse:
    handler = fns["http_app_func"].get_user_function()
    req = func.HttpRequest(
        method=method,
        url=f"http://localhost{url}",
        headers={"content-type": "application/json"},
        body=json.dumps(body).encode() if body is not None else b"",
    )
    response: func.HttpResponse = asyncio.run(handler(req, None))
    return response


def test_registered_functions(app_functions: dict[str, Any], pool: str) -> None:
    fns = app_functions
    assert set(fns) == {"http_app_func", "finalize_runs", "start_scheduled_runs"}
    trigger = fns["finalize_runs"].get_trigger()
    assert trigger.get_dict_repr()["type"] == "timerTrigger"

    bad = call_http(fns, "POST", "/api/runs", {"target": "/mnt/x", "pool": pool})
    assert bad.status_code == 400
    assert json.loads(bad.get_body())["errors"][0]["field"] == "target"

    created = call_http(fns, "POST", "/api/runs", run_body(pool))
    assert created.status_code == 202
    run_id = json.loads(created.get_body())["id"]
    assert created.headers["Location"] == f"/api/runs/{run_id}"

    # Store a result for the run's item, built from real fio output, through the function.
    item = WorkItem.model_validate(context.store().get_item(run_id, f"{run_id}.s0.c0")["work_item"])
    doc = json.loads((DATA / "fio.json").read_text())
    result = result_from_capture(item, "fn-test")
    stored = call_http(fns, "PUT", f"/api/agent/results/{item.item_id}", result)
    assert stored.status_code == 201
    again = call_http(fns, "PUT", f"/api/agent/results/{item.item_id}", result)
    assert again.status_code == 200 and json.loads(again.get_body())["duplicate"] is True

    # The timer function aggregates the finished run and marks it completed.
    fns["finalize_runs"].get_user_function()(TimerRequest(past_due=False))
    # The schedules timer runs too (whatever schedules other tests left are idempotent).
    fns["start_scheduled_runs"].get_user_function()(TimerRequest(past_due=False))
    run = json.loads(call_http(fns, "GET", f"/api/runs/{run_id}").get_body())
    assert run["state"] == "completed"
    assert run["aggregate"]["clients"] == 1
    assert run["aggregate"]["read"]["total_ios"] == doc["jobs"][0]["read"]["total_ios"]
