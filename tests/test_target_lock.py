"""One run at a time per target, end to end: real agents, real fio, stored times."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import httpx

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues
from benchctl.localstack import Stack
from core.models.locks import TargetLock, Waiter
from core.runs.admission import UNWRITTEN_HOLDER_GRACE_MS
from core.runs.service import RunService
from tests.conftest import AgentFactory, run_body, wait_state


def io_window(api: httpx.Client, run_id: str) -> tuple[int, int]:
    """From the stored results: first client's start to last client's end (Unix ms)."""
    run = api.get(f"/api/runs/{run_id}").json()
    results = [
        api.get(f"/api/runs/{run_id}/results/{i['id']}").json()
        for i in run["items"]
        if i["state"] == "completed"
    ]
    assert results, f"run {run_id} stored no result"
    return min(r["started_at_ms"] for r in results), max(r["ended_at_ms"] for r in results)


def test_runs_on_one_target_never_overlap_and_wait_in_order(
    api: httpx.Client, agents: AgentFactory, pool: str
) -> None:
    agents()
    agents()  # two agents: without the lock both runs would start at once
    bodies = [run_body(pool, runtime=3) for _ in range(3)]
    ids: list[str] = []
    replies: list[dict[str, Any]] = []
    for body in bodies:
        r = api.post("/api/runs", json=body)
        assert r.status_code == 202, r.text
        replies.append(r.json())
        ids.append(r.json()["id"])
    assert replies[0]["state"] == "queued"
    assert [r["state"] for r in replies[1:]] == ["waiting", "waiting"]
    assert [r["queue_position"] for r in replies[1:]] == [1, 2]

    # While one holds the target, a request that asks to be refused is, and writes nothing.
    before = len(api.get("/api/runs", params={"limit": 200}).json()["runs"])
    refused = api.post("/api/runs", json={**run_body(pool), "on_busy": "refuse"})
    assert refused.status_code == 409
    message = refused.json()["errors"][0]["message"]
    assert message.startswith("target scratch is busy with run ") and "2 waiting" in message
    assert len(api.get("/api/runs", params={"limit": 200}).json()["runs"]) == before

    for run_id in ids:
        wait_state(api, run_id, ("completed",), timeout=120)
    windows = [io_window(api, i) for i in ids]
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(windows)]
    print(f"I/O windows (ms): {[(w[1] - w[0]) for w in windows]}, gaps between runs: {gaps}")
    for (_, end), (start, _) in itertools.pairwise(windows):
        assert start >= end, f"overlap: {windows}"
    # Submission order kept: each started after the one before it ended.
    assert [w[0] for w in windows] == sorted(w[0] for w in windows)


def test_concurrent_submits_admit_exactly_one(api: httpx.Client, pool: str, stack: Any) -> None:
    """Eight requests at the same moment on an idle target: one is admitted, seven wait,
    with distinct positions (the lock is a compare-and-swap on one document). Each has an
    Idempotency-Key and is retried with it while the answer is 503, as benchctl does: a
    POST the database did not confirm within its deadline is answered 503 (a loaded
    machine: 2 of about 10 runs beside other tests at load 11-24)."""
    replies: list[dict[str, Any]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)
    prefix = f"lock-{time.time_ns()}"

    def submit(n: int) -> None:
        with httpx.Client(base_url=stack.api_url, timeout=30) as c:
            barrier.wait()
            for _ in range(10):
                r = c.post(
                    "/api/runs", json=run_body(pool), headers={"Idempotency-Key": f"{prefix}-{n}"}
                )
                if r.status_code != 503:
                    break
                time.sleep(0.5)
            assert r.status_code in (200, 202), r.text
            with lock:
                replies.append(r.json())

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    states = sorted(r["state"] for r in replies)
    assert states == ["queued"] + ["waiting"] * 7, replies
    positions = sorted(
        api.get(f"/api/runs/{r['id']}").json()["queue_position"]
        for r in replies
        if r["state"] == "waiting"
    )
    assert positions == list(range(1, 8))
    for r in replies:
        api.delete(f"/api/runs/{r['id']}")


def test_the_timer_reads_no_queue_and_admits_where_nobody_else_will(
    stack: Stack, store: CosmosStore, queues: WorkQueues, artifacts: BlobArtifacts, pool: str
) -> None:
    """A held target's queue (a thousand runs long in bench/intake.py) is never read by the
    timer: the locks come without their queues. It admits on free targets, and on targets
    whose holder was never written (past the grace) or has ended without releasing (a
    crash between its end and its release: issue 24.6's simulation found its waiters
    waiting for good)."""
    queue = [Waiter(run_id=f"r-{i}", created_ms=i) for i in range(3)]
    service = RunService(store, queues, artifacts, pools=tuple(stack.pool_names))
    done = service.submit({**run_body(pool), "target": "vol1"})[0].id
    service.cancel(done)  # nothing claimed it: it ends at once
    live = service.submit({**run_body(pool), "target": "vol2"})[0].id
    old = int(time.time() * 1000) - UNWRITTEN_HOLDER_GRACE_MS - 1
    locks = {
        "live": TargetLock(id=f"{pool}:live", run_id=live, queue=queue),
        "stalled": TargetLock(id=f"{pool}:stalled", queue=queue),
        "idle": TargetLock(id=f"{pool}:idle"),
        "ended": TargetLock(id=f"{pool}:ended", run_id=done, queue=queue),
        "unwritten": TargetLock(id=f"{pool}:unwritten", run_id="r-x", since_ms=old, queue=queue),
        "young": TargetLock(id=f"{pool}:young", run_id="r-y", since_ms=old + 60_000, queue=queue),
    }
    for lock in locks.values():
        store.targets.create(lock)
    listed = [k for k in store.targets.with_waiters() if k.id.startswith(f"{pool}:")]
    assert all(k.queue == [] for k in listed)
    mine = sorted(k for k in service.admission.stalled() if k.startswith(f"{pool}:"))
    assert mine == [f"{pool}:ended", f"{pool}:stalled", f"{pool}:unwritten"]
    service.cancel(live)
