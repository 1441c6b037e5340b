"""No input gets a 5xx (issue 12, point 6): one test per class of input, against the real
API on the session's local stack. Each answer is a 4xx in the error shape, naming the field.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchctl.localstack import Stack
from core.models import WorkItem, Workload
from core.monitoring.notify import sign, teams_signature
from functions.admin_api import MAX_IMPORT_BYTES
from tests.conftest import BOT_SECRET, FUZZ_POOL, TEAMS_BOT_SECRET_B64, result_from_capture
from tests.second_api import SecondApi

RUN = "r-" + "0" * 32
ITEM = RUN + ".s0.c0"
AGENT_VERBS = ("claim", "ready", "barrier", "heartbeat", "failure", "cancelled", "register")


def errors_of(r: httpx.Response, status: int = 400) -> dict[str, str]:
    """The error answer's fields and messages; fails unless it is ``status`` in the shape."""
    assert r.status_code == status, (r.status_code, r.text[:500])
    assert r.headers["content-type"] == "application/json"
    body = json.loads(r.content.decode("utf-8"))  # strict UTF-8: no surrogate escaped out
    assert set(body) == {"errors"} and body["errors"]
    return {e["field"]: e["message"] for e in body["errors"]}


# Every operation with a JSON body, path parameters filled in. test_openapi.py checks that
# this is exactly the set the API's document lists (the chat doors are signed: tested below).
BODY_OPERATIONS = [
    ("POST", "/api/runs"),
    ("POST", "/api/schedules"),
    ("PATCH", "/api/schedules/sch-" + "0" * 16),
    ("PATCH", f"/api/regressions/{'0' * 16}/{'0' * 16}.read.iops.gate.{RUN}"),
    *(("POST", f"/api/agent/{verb}") for verb in AGENT_VERBS),
    ("PUT", f"/api/agent/results/{ITEM}"),
    ("POST", "/api/targets/scratch/clean"),
    ("POST", f"/api/admin/import/runs/{RUN}"),
    ("POST", "/api/admin/import/schedules"),
]


def send(api: httpx.Client, method: str, url: str, raw: bytes) -> httpx.Response:
    return api.request(method, url, content=raw, headers={"Content-Type": "application/json"})


@pytest.fixture
def operations() -> list[tuple[str, str]]:
    return BODY_OPERATIONS


def test_continuation_tokens_malformed_are_400_and_not_given_by_the_api_404(
    api: httpx.Client,
) -> None:
    """The document says a token is URL-safe Base64 (what a listing gives): anything else
    is 400; a token of that form the listing did not give names no page: 404 (issue 24.5:
    the schema cannot tell such a token from a real one, so it is not "invalid input").
    The admin's export listing pages the same way (an unknown token was an undocumented
    404 there: Schemathesis found it)."""
    forged = base64.urlsafe_b64encode(b'{"token": 5}').decode()
    control = base64.urlsafe_b64encode(b"tok\nen").decode()
    for listing in ("/api/runs", "/api/admin/export/runs"):
        for token in ("é", "%", "a b", "gA==?", "a" * 16385):
            r = api.get(listing, params={"continuation": token})
            assert set(errors_of(r)) == {"continuation"}, (listing, token)
        for token in ("abc", "_w", "gA==", "AAAA", forged, control):
            r = api.get(listing, params={"continuation": token})
            assert set(errors_of(r, 404)) == {"continuation"}, (listing, token)


def test_query_parameters_are_400_naming_each(api: httpx.Client) -> None:
    r = api.get("/api/runs", params={"limit": "abc", "state": "x", "tag": "=v", "target": "A/"})
    assert set(errors_of(r)) == {"limit", "state", "tag", "target"}
    for limit in ("0", "201", "9" * 5000, "1e3", "-1"):
        assert set(errors_of(api.get("/api/runs", params={"limit": limit}))) == {"limit"}
    assert set(errors_of(api.get("/api/compare"))) == {"a", "b"}
    assert set(errors_of(api.get("/api/compare", params={"a": RUN, "b": "x" * 9000}))) == {"b"}
    # Percent-encoded bytes that are not UTF-8 (here a lone surrogate's) in a query value.
    assert set(errors_of(api.get("/api/regressions?state=%ED%A0%80"))) == {"state"}


def test_path_parameters_are_400_when_malformed_and_404_when_unknown(api: httpx.Client) -> None:
    malformed = {
        f"/api/runs/{'x' * 5000}": "run_id",
        "/api/runs/r-XYZ/curves": "run_id",
        f"/api/runs/{RUN}/results/{RUN}.s0": "item_id",
        "/api/schedules/sch-bad": "schedule_id",
        "/api/series/%C3%A9": "key",
        "/api/profiles/%F0%9F%92%A5": "name",
    }
    for url, field in malformed.items():
        assert set(errors_of(api.get(url))) == {field}, url
    triage = api.patch(f"/api/regressions/{'0' * 16}/{'x' * 300}", json={"state": "new"})
    assert set(errors_of(triage)) == {"regression_id"}
    for url in (f"/api/runs/{RUN}", f"/api/runs/{RUN}/results/{ITEM}", "/api/profiles/nope"):
        errors_of(api.get(url), 404)
    errors_of(api.get("/api/no/such/route"), 404)
    errors_of(api.put("/api/runs"), 405)  # its Allow header: below


def test_headers_are_400_naming_each(api: httpx.Client) -> None:
    body = {"target": "/mnt", "pool": FUZZ_POOL}
    r = api.post("/api/runs", json=body, headers={"Idempotency-Key": "k" * 201})
    assert set(errors_of(r)) == {"Idempotency-Key"}
    latin1 = {b"Idempotency-Key": "clé".encode("latin-1"), b"X-Bench-Door": b"\xff\xfe"}
    assert set(errors_of(api.post("/api/runs", json=body, headers=latin1))) == {"target"}


def test_bodies_that_are_not_utf8_are_400(
    api: httpx.Client, operations: list[tuple[str, str]]
) -> None:
    for method, url in operations:
        for raw in (b'{"target": "\xff"}', b"\xfe\xff\x00{", "{}".encode("utf-16")):
            errors = errors_of(send(api, method, url, raw))
            assert list(errors) == ["(body)"] and "UTF-8" in errors["(body)"], (url, raw)


def test_numbers_json_or_a_double_cannot_hold_are_400_naming_the_field(
    api: httpx.Client, operations: list[tuple[str, str]]
) -> None:
    for method, url in operations:
        for number in ("9" * 5000, "-" + "9" * 400, "1e400", "NaN", "Infinity", "-Infinity"):
            raw = f'{{"agent_id": "a", "nested": {{"n": [1, {number}]}}}}'.encode()
            errors = errors_of(send(api, method, url, raw))
            assert errors == {"nested.n.1": errors["nested.n.1"]}, (url, number)
    r = send(api, "POST", "/api/runs", b'{"target": "x", "clients": ' + b"9" * 5000 + b"}")
    assert "5,000 digits" in errors_of(r)["clients"]


def test_deeply_nested_bodies_are_400(api: httpx.Client, operations: list[tuple[str, str]]) -> None:
    for method, url in operations:
        for depth in (65, 2_000, 200_000):
            raw = b'{"a": ' + b"[" * depth + b"]" * depth + b"}"
            errors = errors_of(send(api, method, url, raw))
            assert len(errors) == 1 and "nested deeper than 64" in next(iter(errors.values()))


def test_lone_surrogates_in_values_and_keys_are_400_naming_the_field(
    api: httpx.Client, operations: list[tuple[str, str]]
) -> None:
    for method, url in operations:
        assert set(errors_of(send(api, method, url, b'{"owner": "a\\ud800"}'))) == {"owner"}
        errors = errors_of(send(api, method, url, b'{"x": {"\\udfff": 1}}'))
        assert list(errors) == ["x.\\udfff"]
    # A surrogate pair is one real character, not an error.
    r = send(api, "POST", "/api/runs", b'{"target": "\\ud83d\\udca5", "pool": "fuzz"}')
    assert set(errors_of(r)) == {"target"}


def test_huge_strings_are_400_with_short_messages(
    api: httpx.Client, operations: list[tuple[str, str]]
) -> None:
    big = "x" * (300 << 10)  # three of them stay under the 1 MiB body cap
    for method, url in operations:
        r = api.request(method, url, json={"target": big, "owner": big, "agent_id": big})
        assert all(len(m) <= 500 for m in errors_of(r).values()), url
    body = {"target": "fuzz", "pool": FUZZ_POOL, "tags": {"k": big}}
    assert set(errors_of(api.post("/api/runs", json=body))) == {"tags.k"}
    ids = [r["id"] for r in api.get("/api/runs", params={"target": "fuzz"}).json()["runs"]]
    errors_of(api.post("/api/runs", json={**body, "workload": {"bs": big}}))
    again = [r["id"] for r in api.get("/api/runs", params={"target": "fuzz"}).json()["runs"]]
    assert again == ids  # nothing written


def test_bodies_over_the_cap_are_413_before_they_are_parsed(
    api: httpx.Client, operations: list[tuple[str, str]]
) -> None:
    """A 14 MB body with 200,000 tags took 4-5 s of the API's CPU to parse before its 400
    (issue 24.5): over 1 MiB (a result: 2 MiB; an admin's import batch: 16 MiB) it is 413,
    unread."""
    tags = {f"t{i}": "v" * 52 for i in range(200_000)}
    huge = json.dumps({"target": "fuzz", "pool": FUZZ_POOL, "tags": tags}).encode()
    assert len(huge) > 13_000_000
    started = time.monotonic()
    r = send(api, "POST", "/api/runs", huge)
    took = time.monotonic() - started
    assert errors_of(r, 413) == {"(body)": f"the body is {len(huge):,} bytes; at most 1,048,576"}
    print(f"a {len(huge):,}-byte body: 413 in {took:.2f} s")
    just_over = b'{"x": "' + b"y" * (1 << 20) + b'"}'
    # An agent's result (one Cosmos DB document) and an admin's import batch are larger.
    caps = {"/api/agent/results/": 2 << 20, "/api/admin/import/": MAX_IMPORT_BYTES}
    for method, url in operations:
        cap = next((c for prefix, c in caps.items() if url.startswith(prefix)), 1 << 20)
        over = b'{"x": "' + b"y" * cap + b'"}'
        assert set(errors_of(send(api, method, url, over), 413)) == {"(body)"}, url
        if cap > 1 << 20:  # a result a little over 1 MiB is read, and judged on its fields
            assert errors_of(send(api, method, url, just_over)) != {}
    # Sent without a Content-Length (chunked): counted while read, refused past the cap.
    chunks = (b"[" + b"0," * 600_000 + b"0]" for _ in range(1))
    r = api.post("/api/runs", content=chunks, headers={"Content-Type": "application/json"})
    assert set(errors_of(r, 413)) == {"(body)"}


def test_a_key_given_twice_is_400_naming_it(
    api: httpx.Client, operations: list[tuple[str, str]]
) -> None:
    """{"target": "a", "target": "b"} was accepted, the last one winning (issue 24.5)."""
    r = send(api, "POST", "/api/runs", b'{"target": "a", "pool": "fuzz", "target": "b"}')
    assert errors_of(r) == {"target": "given more than once in its object (duplicate key)"}
    nested = b'{"target": "fuzz", "pool": "fuzz", "workload": {"bs": "4k", "bs": "8k"}}'
    assert set(errors_of(send(api, "POST", "/api/runs", nested))) == {"workload.bs"}
    for method, url in operations:
        raw = b'{"agent_id": "a", "x": {"k": 1, "k": 1}}'
        assert set(errors_of(send(api, method, url, raw))) == {"x.k"}, url


def test_405_names_every_method_of_the_path(api: httpx.Client) -> None:
    """PUT /api/runs said "Allow: POST", hiding GET (issue 24.5)."""
    for url, allowed in {
        "/api/runs": "GET, POST",
        f"/api/runs/{RUN}": "DELETE, GET",
        "/api/schedules/sch-" + "0" * 16: "DELETE, GET, PATCH",
        "/api/agent/claim": "POST",
    }.items():
        method = "PUT"
        r = api.request(method, url)
        errors_of(r, 405)
        assert r.headers["allow"] == allowed, url


def teams_post(api: httpx.Client, activity: dict[str, Any] | bytes) -> httpx.Response:
    raw = activity if isinstance(activity, bytes) else json.dumps(activity).encode()
    auth = f"HMAC {teams_signature(raw, TEAMS_BOT_SECRET_B64)}"
    return api.post(
        "/api/bot/teams",
        content=raw,
        headers={"Authorization": auth, "Content-Type": "application/json"},
    )


def webhook_post(api: httpx.Client, raw: bytes) -> httpx.Response:
    headers = sign(raw, secret=BOT_SECRET.encode(), timestamp=int(time.time()))
    return api.post("/api/bot/webhook", content=raw, headers=headers)


def test_chat_doors_take_any_signed_body_without_a_5xx(api: httpx.Client) -> None:
    now = datetime.now(UTC).isoformat()
    # Cosmos DB ids may not hold / \ ? # nor exceed 255 characters: Teams' ids are opaque.
    for activity_id in ("a/b?c#d\\e", "x" * 300, "\u00e9\U0001f4a5"):
        r = teams_post(api, {"id": activity_id, "timestamp": now, "text": "help"})
        assert r.status_code == 200 and r.json()["type"] == "message", r.text
        assert teams_post(api, {"id": activity_id, "timestamp": now}).status_code == 409
    odd_sender = {"id": str(uuid.uuid4()), "timestamp": now, "from": 5, "text": ["help"]}
    assert teams_post(api, odd_sender).status_code == 200
    for raw in (b"\xff", b"[" * 100_000, b'{"id": NaN}', b'{"id": "\\ud800"}', b"[]", b"7"):
        errors_of(teams_post(api, raw))
        errors_of(webhook_post(api, raw))
    r = webhook_post(api, json.dumps({"text": "help", "user": {"n": 1}}).encode())
    assert r.status_code == 200 and r.json()["command"] == "help"


def test_ids_in_bodies_have_their_fixed_forms(api: httpx.Client) -> None:
    # They become Cosmos DB ids and partition keys: a 100,000-character one was a 503.
    item = WorkItem(
        run_id=RUN, item_id=ITEM, step=0, client=0, clients=1, pool=FUZZ_POOL,
        targets=["fuzz"], engine="fio", workload=Workload(),
    )  # fmt: skip
    result = result_from_capture(item, "inputs")
    long_id = "x" * 100_000
    r = api.put(f"/api/agent/results/{ITEM}", json={**result, "run_id": long_id})
    assert set(errors_of(r)) == {"run_id"}
    ref = {"agent_id": "inputs", "run_id": long_id, "item_id": ITEM}
    for verb in ("ready", "barrier", "heartbeat", "cancelled"):
        assert set(errors_of(api.post(f"/api/agent/{verb}", json=ref))) == {"run_id"}
    work = {**item.model_dump(mode="json"), "run_id": long_id}
    claim = {"agent_id": "inputs", "work_item": work, "dequeue_count": 1}
    assert set(errors_of(api.post("/api/agent/claim", json=claim))) == {"work_item.run_id"}
    errors_of(api.put(f"/api/agent/results/{ITEM}", json=result), 404)  # well formed, unknown


def test_a_chat_door_not_configured_is_404_saying_so(stack: Stack, tmp_path: Path) -> None:
    """It answered 503, which pipelines and SDK retry policies retry for ever (issue
    24.5): a door that is not enabled is not there."""
    env = {"BENCH_TEAMS_BOT_SECRET": "", "BENCH_BOT_SECRET": ""}
    second = SecondApi(stack, tmp_path, env).start()
    try:
        with httpx.Client(base_url=second.url, timeout=10) as client:
            for door, setting in (("teams", "TEAMS_BOT_SECRET"), ("webhook", "BOT_SECRET")):
                r = client.post(f"/api/bot/{door}", json={"text": "help"})
                message = errors_of(r, 404)["(path)"]
                assert "door is not enabled" in message and f"BENCH_{setting}" in message
    finally:
        second.stop()
