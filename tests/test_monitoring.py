"""Continuous monitoring: schedules fire exactly once, series segments, regressions found
and announced once, through the real local stack."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import UTC, datetime

import httpx
import pytest

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues
from benchctl.localstack import Stack
from core.models.stored import Run
from core.monitoring.notify import verify
from core.monitoring.scheduler import Scheduler
from core.runs.service import RunService
from tests.conftest import WEBHOOK_SECRET, AgentFactory, Receiver, run_body, wait_state


class Clock:
    def __init__(self, iso: str) -> None:
        self.t = datetime.fromisoformat(iso).timestamp()

    def __call__(self) -> float:
        return self.t

    def set(self, iso: str) -> None:
        self.t = datetime.fromisoformat(iso).timestamp()


def test_schedule_fires_once_under_concurrency_and_once_after_a_gap(
    stack: Stack,
    store: CosmosStore,
    queues: WorkQueues,
    artifacts: BlobArtifacts,
    pool: str,
) -> None:
    clock = Clock("2031-03-04T10:00:10+00:00")
    service = RunService(
        store,
        queues,
        artifacts,
        pools=tuple(stack.pool_names),
        pool_configs=stack.settings().pool_configs,
        clock=clock,
    )
    scheduler = Scheduler(store, service, clock=clock)
    sched = scheduler.create({"cron": "* * * * *", "owner": "ci", "request": run_body(pool)})

    def runs() -> list[Run]:
        docs, _ = store.runs.page(
            target=None, state=None, tag=("schedule", sched.id), limit=200, continuation=None
        )
        return docs

    clock.set("2031-03-04T10:01:05+00:00")
    threads = [threading.Thread(target=scheduler.tick) for _ in range(2)]  # two timers at once
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.tags["fire"] for r in runs()] == ["2031-03-04T10:01:00+00:00"]
    who = runs()[0].requested_by.model_dump()
    assert who == {"name": f"schedule:{sched.id} (ci)", "role": "engineer", "door": "schedule"}
    clock.set("2031-03-04T10:01:40+00:00")
    scheduler.tick()
    assert len(runs()) == 1  # same minute: nothing new

    clock.set("2031-03-04T10:11:30+00:00")  # the timer was down for 10 minutes
    scheduler.tick()
    scheduler.tick()
    fires = sorted(r.tags["fire"] for r in runs())
    assert fires == ["2031-03-04T10:01:00+00:00", "2031-03-04T10:11:00+00:00"]  # one catch-up
    scheduler.patch(sched.id, {"enabled": False})
    clock.set("2031-03-04T10:20:30+00:00")
    scheduler.tick()
    scheduler.patch(sched.id, {"enabled": True})  # re-enabled: no catch-up for 10:20
    scheduler.tick()
    assert len(runs()) == 2
    clock.set("2031-03-04T10:21:05+00:00")
    scheduler.tick()
    assert len(runs()) == 3  # the next due minute fires as usual
    for r in runs():
        service.cancel(r.id)  # no agent serves this pool


def test_schedules_api_validates_and_manages(api: httpx.Client, pool: str) -> None:
    bad = api.post(
        "/api/schedules",
        json={"cron": "61 * * * *", "owner": "me", "request": {"target": "/x", "pool": pool}},
    )
    assert bad.status_code == 400
    fields = {e["field"] for e in bad.json()["errors"]}
    assert "cron" in fields or "request.target" in fields
    created = api.post(
        "/api/schedules", json={"cron": "0 3 * * *", "owner": "me", "request": run_body(pool)}
    ).json()
    assert created["enabled"] is True and created["next_fire"].endswith("03:00:00+00:00")
    patched = api.patch(f"/api/schedules/{created['id']}", json={"enabled": False}).json()
    assert patched["enabled"] is False
    assert created["id"] in {s["id"] for s in api.get("/api/schedules").json()["schedules"]}
    assert api.delete(f"/api/schedules/{created['id']}").status_code == 204
    assert api.get(f"/api/schedules/{created['id']}").status_code == 404


# Its reference runs are uncapped fio: their spread is the machine's spare CPU, so it runs
# with nothing else of the suite (the timing phase).
@pytest.mark.timing
def test_throttled_run_is_a_regression_announced_once(
    api: httpx.Client, agents: AgentFactory, pool: str, receiver: Receiver
) -> None:
    agents()
    body = run_body(pool, runtime=1, iodepth=1)
    iops = []
    for _ in range(5):
        run_id = api.post("/api/runs", json=body).json()["id"]
        run = wait_state(api, run_id, ("completed", "failed"))
        assert run["state"] == "completed"
        iops.append(run["aggregate"]["read"]["iops"])
    # The throttled run through the CLI, as a pipeline would: exit 3 on a regression.
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchctl",
            "--api-url",
            str(api.base_url),
            "run",
            "--target",
            "scratch",
            "--pool",
            pool,
            "--rw",
            "randread",
            "--bs",
            "4k",
            "--size",
            "8m",
            "--runtime",
            "1",
            "--iodepth",
            "1",
            "--tag",
            "test=yes",
            "--rate-iops",
            str(int(min(iops) / 2)),
            "--wait",
            "--fail-on-regression",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    gate = json.loads(cli.stdout).get("gate") or {}
    iops_verdict = next((m for m in gate.get("metrics", []) if m["metric"] == "read.iops"), None)
    assert cli.returncode == 3, (iops, iops_verdict, cli.stderr)
    assert "regression: step 0 read.iops" in cli.stderr
    assert json.loads(cli.stdout)["gate"]["verdict"] == "regression"
    slow_id = json.loads(cli.stdout)["id"]

    series = [
        s
        for s in api.get("/api/series").json()["series"]
        if s["target"] == "scratch"
        and s["workload"].get("iodepth") == 1
        and s["workload"].get("runtime") == 1
    ]
    key = next(s["series_key"] for s in series if s["points"] >= 6)
    found = api.get(f"/api/series/{key}").json()
    assert [r["run_id"] for r in found["history"]][-1] == slow_id
    regs = [r for r in found["regressions"] if r["kind"] == "regression"]
    # IOPS halved; other metrics of the same run may move too (one event, one message).
    assert {r["first_run_id"] for r in regs} == {slow_id}
    regs = [r for r in regs if r["metric"] == "read.iops"]
    assert [(r["method"], r["state"]) for r in regs] == [("gate", "new")]
    assert regs[0]["change_pct"] < -40 and regs[0]["before"]["median"] > regs[0]["after"]["mean"]

    def ours() -> list[dict]:  # type: ignore[type-arg]
        out = []
        for headers, raw in receiver.posts:
            doc = json.loads(raw)
            if doc.get("event") == "regression.detected" and doc["regression"]["series_key"] == key:
                now = int(datetime.now(UTC).timestamp())
                assert verify(raw, headers, secret=WEBHOOK_SECRET, now=now)
                out.append(doc)
        return out

    assert len(ours()) == 1
    assert ours()[0]["links"]["run"].endswith(f"/api/runs/{slow_id}")
    import time

    time.sleep(2)  # several timer ticks later: nothing new
    assert len(ours()) == 1
    triaged = api.patch(f"/api/regressions/{key}/{regs[0]['id']}", json={"state": "acknowledged"})
    assert triaged.json()["state"] == "acknowledged"
