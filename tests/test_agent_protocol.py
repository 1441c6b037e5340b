"""The agent protocol keeps its promises against racing and lying callers: one winner per
claim, reports only from the agent holding the item (its identity proved by its key or its
managed identity), nothing changed by a refused report. Real API processes, Azurite, the
Cosmos DB server and, end to end, real agents and fio."""

from __future__ import annotations

import base64
import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.cosmos import CosmosStore
from benchctl import localstack
from benchctl.localstack import Proc, Stack
from core.models import WorkItem
from tests.conftest import result_from_capture, run_body, wait_state
from tests.second_api import SecondApi

KEYS = {
    "agent-k1": ("agent", "agent-one-key-0123456789"),
    "agent-k2": ("agent", "agent-two-key-0123456789"),
    "ci": ("engineer", "ci-protocol-key-01234567"),
}
POOL_IDENTITY, OTHER_POOL_IDENTITY = "oid-pool-a", "oid-pool-b"


def key(name: str) -> dict[str, str]:
    return {"X-Api-Key": KEYS[name][1]}


def managed_identity(oid: str) -> dict[str, str]:
    """What App Service Authentication passes for an agent's managed identity."""
    principal = {"auth_typ": "aad", "claims": [{"typ": "oid", "val": oid}]}
    return {
        "x-ms-client-principal": base64.b64encode(json.dumps(principal).encode()).decode(),
        "x-ms-client-principal-id": oid,
    }


@pytest.fixture(scope="module")
def keyed(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecondApi]:
    """An API requiring credentials: per-agent keys, and managed identities (EasyAuth)."""
    env = {
        "BENCH_API_KEYS": ",".join(f"{n}:{r}:{k}" for n, (r, k) in KEYS.items()),
        "BENCH_TRUST_EASYAUTH": "1",
        "BENCH_AGENT_PRINCIPALS": f"{POOL_IDENTITY},{OTHER_POOL_IDENTITY}",
    }
    second = SecondApi(stack, tmp_path_factory.mktemp("keyed-api"), env).start()
    yield second
    second.stop()


def as_engineer(second: SecondApi) -> httpx.Client:
    """A client of the keyed API; agent calls pass their own key instead."""
    return httpx.Client(base_url=second.url, timeout=30, headers=key("ci"))


def first_item(store: CosmosStore, run_id: str, client: int = 0) -> WorkItem:
    return store.items.get_item(run_id, f"{run_id}.s0.c{client}").work_item


def claim_body(item: WorkItem, agent_id: str, message_id: str, dequeue: int = 1) -> dict[str, Any]:
    return {
        "work_item": item.model_dump(mode="json"),
        "agent_id": agent_id,
        "dequeue_count": dequeue,
        "message_id": message_id,
    }


def ref(item: WorkItem, agent_id: str) -> dict[str, str]:
    return {"run_id": item.run_id, "item_id": item.item_id, "agent_id": agent_id}


def race_claims(url: str, item: WorkItem, racers: int) -> dict[str, str]:
    """``racers`` agents claim ``item`` at the same moment; their answers by agent id. Odd
    racers carry the same message, even ones copies of it sent twice."""
    answers: dict[str, str] = {}
    lock = threading.Lock()
    start = threading.Barrier(racers)

    def race(k: int) -> None:
        agent = f"racer-{item.client}-{k}"
        message = "copy-1" if k % 2 else f"copy-{k}"
        with httpx.Client(base_url=url, timeout=30) as c:
            start.wait()
            r = c.post("/api/agent/claim", json=claim_body(item, agent, message))
        with lock:
            answers[agent] = r.json()["action"]

    threads = [threading.Thread(target=race, args=(k,)) for k in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def test_concurrent_claims_for_one_item_elect_exactly_one(
    stack: Stack, api: httpx.Client, store: CosmosStore, pool: str
) -> None:
    """Eight agents claim one item at the same moment: exactly one is told to run (issue
    11.8), and it is the one the item document names. Four items, one race each."""
    body = {**run_body(pool), "clients": 4}
    run_id = api.post("/api/runs", json=body).json()["id"]
    for client in range(4):
        item = first_item(store, run_id, client)
        answers = race_claims(stack.api_url, item, 8)
        winners = [a for a, action in answers.items() if action == "run"]
        assert len(answers) == 8 and len(winners) == 1, answers
        doc = store.items.get_item(run_id, item.item_id)
        assert doc.state == "claimed" and doc.agent_id == winners[0]
        assert all(action == "drop" for a, action in answers.items() if a != winners[0])
    api.delete(f"/api/runs/{run_id}")


def test_a_second_agent_cannot_forge_reports_for_an_item_it_does_not_hold(
    keyed: SecondApi, store: CosmosStore, pool: str
) -> None:
    with as_engineer(keyed) as c:
        run_id = c.post("/api/runs", json=run_body(pool)).json()["id"]
        item = first_item(store, run_id)
        holder = "agent-k1"
        r = c.post("/api/agent/claim", json=claim_body(item, holder, "m1"), headers=key(holder))
        assert r.json()["action"] == "run"
        assert r.json()["agent_protocol"] == 4  # its agents carry their small artifacts
        go = c.post("/api/agent/ready", json=ref(item, holder), headers=key(holder)).json()
        assert go["status"] == "go"
        before = store.items.get_item(run_id, item.item_id)

        forger = "agent-k2"
        forged = result_from_capture(item, forger)
        forged["read"]["iops"] = 9_999_999.0  # the audit's forgery
        attempts = {
            "claim": ("POST", "/api/agent/claim", claim_body(item, forger, "m-forged")),
            "ready": ("POST", "/api/agent/ready", ref(item, forger)),
            "barrier": ("POST", "/api/agent/barrier", ref(item, forger)),
            "heartbeat": ("POST", "/api/agent/heartbeat", ref(item, forger)),
            "failure": (
                "POST",
                "/api/agent/failure",
                {**ref(item, forger), "message": "disk on fire", "report_id": "f1"},
            ),
            "cancelled": ("POST", "/api/agent/cancelled", ref(item, forger)),
            "result": ("PUT", f"/api/agent/results/{item.item_id}", forged),
        }
        for what, (method, path, body) in attempts.items():
            r = c.request(method, path, json=body, headers=key(forger))
            if what == "claim":  # a claim is a question: the copy is dropped
                assert r.status_code == 200 and r.json()["action"] == "drop", r.text
                continue
            assert r.status_code == 409, (what, r.status_code, r.text)
            assert f"agent {forger} does not hold item {item.item_id}" in r.text, r.text
        upload = f"/api/agent/artifacts/{item.item_id}/raw"
        r = c.put(upload, params={"agent_id": forger}, content=b"\x1f\x8b", headers=key(forger))
        assert r.status_code == 409, r.text
        # Its key proves who it is: posing as the holder is refused, naming the field.
        r = c.put(upload, params={"agent_id": holder}, content=b"\x1f\x8b", headers=key(forger))
        assert r.status_code == 403 and r.json()["errors"][0]["field"] == "agent_id"
        r = c.put(
            f"/api/agent/results/{item.item_id}",
            json={**forged, "agent_id": holder},
            headers=key(forger),
        )
        assert r.status_code == 403 and r.json()["errors"][0]["field"] == "agent_id"

        after = store.items.get_item(run_id, item.item_id)
        assert after == before  # the same document, the same ETag: nothing was written
        assert store.results.of_run(run_id) == []

        # The holder goes on undisturbed; its result, not the forged one, is the aggregate.
        beat = c.post("/api/agent/heartbeat", json=ref(item, holder), headers=key(holder))
        assert beat.json() == {"cancel": False}
        time.sleep(max(0, go["start_at_ms"] / 1000 - time.time()) + 0.1)
        genuine = result_from_capture(item, holder)
        r = c.put(f"/api/agent/results/{item.item_id}", json=genuine, headers=key(holder))
        assert r.status_code == 201, r.text
        r = c.put(f"/api/agent/results/{item.item_id}", json=forged, headers=key(forger))
        assert r.status_code == 409
        run = wait_state(c, run_id, ("completed", "failed"))
        assert run["state"] == "completed", run
        # One client without a timeline: its whole-run figure is the aggregate's.
        assert run["aggregate"]["read"]["iops"] == pytest.approx(genuine["read"]["iops"])
        stored = store.results.get(run_id, item.item_id).model_dump(mode="json")
        assert stored["read"]["iops"] == genuine["read"]["iops"]


def test_a_result_for_a_cancelled_item_is_refused(
    keyed: SecondApi, store: CosmosStore, pool: str
) -> None:
    with as_engineer(keyed) as c:
        run_id = c.post("/api/runs", json=run_body(pool)).json()["id"]
        item = first_item(store, run_id)
        holder = key("agent-k1")
        c.post("/api/agent/claim", json=claim_body(item, "agent-k1", "m1"), headers=holder)
        c.post("/api/agent/ready", json=ref(item, "agent-k1"), headers=holder)
        assert c.delete(f"/api/runs/{run_id}").status_code == 202
        beat = c.post("/api/agent/heartbeat", json=ref(item, "agent-k1"), headers=holder)
        assert beat.json() == {"cancel": True}
        r = c.post("/api/agent/cancelled", json=ref(item, "agent-k1"), headers=holder)
        assert r.status_code == 200
        again = c.post("/api/agent/cancelled", json=ref(item, "agent-k1"), headers=holder)
        assert again.status_code == 200  # a retried report: accepted, recorded once
        before = store.items.get_item(run_id, item.item_id)
        assert before.state == "cancelled"

        result = result_from_capture(item, "agent-k1")
        r = c.put(f"/api/agent/results/{item.item_id}", json=result, headers=holder)
        assert r.status_code == 409 and "is cancelled" in r.text, r.text
        assert store.items.get_item(run_id, item.item_id) == before
        assert store.results.of_run(run_id) == []


def test_a_shared_managed_identity_must_match_the_one_that_claimed(
    keyed: SecondApi, store: CosmosStore, pool: str
) -> None:
    """In Azure the agents of a pool may share one managed identity: it proves the pool's
    agent, not which one. The identity is recorded with the item; another identity giving
    the same agent id is refused."""
    with as_engineer(keyed) as c:
        run_id = c.post("/api/runs", json=run_body(pool)).json()["id"]
        item = first_item(store, run_id)
        mine, theirs = managed_identity(POOL_IDENTITY), managed_identity(OTHER_POOL_IDENTITY)
        r = c.post("/api/agent/claim", json=claim_body(item, "vm-1", "m1"), headers=mine)
        assert r.json()["action"] == "run"
        assert store.items.get_item(run_id, item.item_id).principal == f"agent:{POOL_IDENTITY}"
        before = store.items.get_item(run_id, item.item_id)
        for path in ("/api/agent/ready", "/api/agent/heartbeat", "/api/agent/barrier"):
            assert c.post(path, json=ref(item, "vm-1"), headers=theirs).status_code == 409
        assert store.items.get_item(run_id, item.item_id) == before
        assert c.post("/api/agent/ready", json=ref(item, "vm-1"), headers=mine).status_code == 200
        c.delete(f"/api/runs/{run_id}")


@pytest.mark.fio
def test_a_run_works_end_to_end_with_per_agent_keys(
    keyed: SecondApi,
    store: CosmosStore,
    pool: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two real agents, each sending its own key (from the environment for one, the flag
    for the other), run a 2-client step through the API that requires keys."""
    procs: list[Proc] = []
    try:
        for n, name in enumerate(("k1", "k2")):
            scratch = tmp_path / name
            scratch.mkdir()
            secret = KEYS[f"agent-{name}"][1]
            if n == 1:
                monkeypatch.setenv("BENCH_AGENT_API_KEY", secret)  # the agent's environment
            flag = ["--api-key", secret] if n == 0 else None
            targets = {"scratch": str(scratch)}
            procs.append(
                localstack.start_agent(keyed.stack, name, pool=pool, targets=targets, extra=flag)
            )
        with as_engineer(keyed) as c:
            run_id = c.post("/api/runs", json={**run_body(pool), "clients": 2}).json()["id"]
            run = wait_state(c, run_id, ("completed", "failed"), timeout=120)
        assert run["state"] == "completed", run
        assert {i["agent_id"] for i in run["items"]} == {"agent-k1", "agent-k2"}
        assert len(store.results.of_run(run_id)) == 2
    finally:
        for p in procs:
            localstack.stop_proc(p, signal.SIGKILL, timeout=5)
