"""The timer's idempotence under concurrency, and benchctl against the real local stack."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues
from benchctl.localstack import Stack
from core.models.holder import AgentRef
from core.runs.service import RunService
from tests.conftest import AgentFactory, result_from_capture, run_body, wait_state

DATA = Path(__file__).parent / "data" / "fio-randrw"


def test_two_timers_at_once_store_one_aggregate(
    stack: Stack,
    store: CosmosStore,
    queues: WorkQueues,
    artifacts: BlobArtifacts,
    pool: str,
) -> None:
    service = RunService(
        store,
        queues,
        artifacts,
        pools=tuple(stack.pool_names),
        pool_configs=stack.settings().pool_configs,
    )
    run, _ = service.submit(run_body(pool))
    item = store.items.get_item(run.id, f"{run.id}.s0.c0").work_item
    agent = AgentRef("timer-test")  # results are taken only from the item's holder
    assert service.claim(item, agent=agent, dequeue_count=1, message_id="m1").action == "run"
    assert service.ready(run.id, item.item_id, agent).status == "go"
    result = result_from_capture(item, agent.id)
    assert service.store_result(result, agent) is True
    assert service.store_result(result, agent) is False  # redelivered: stored once

    # Two timer instances (and the API's own timer loop) race on the same finished run.
    threads = [threading.Thread(target=service.tick) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    service.tick()  # and once more, later
    assert len(store.results.list_aggregates(run.id)) == 1
    assert len(store.results.of_run(run.id)) == 1
    assert store.runs.get(run.id).state == "completed"


def benchctl(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchctl", "--api-url", stack.api_url, *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_runs_two_clients_and_prints_the_aggregate(
    stack: Stack, api: httpx.Client, agents: AgentFactory, pool: str
) -> None:
    agents()
    agents()
    r = benchctl(
        stack,
        "run",
        "--target",
        "scratch",
        "--pool",
        pool,
        "--clients",
        "2",
        "--runtime",
        "2",
        "--size",
        "8m",
        "--tag",
        "ci=yes",
        "--wait",
        "--format",
        "json",
    )
    assert r.returncode == 0, r.stderr
    run = json.loads(r.stdout)
    assert run["state"] == "completed" and run["aggregate"]["clients"] == 2
    assert wait_state(api, run["id"], ("completed",))["tags"] == {"ci": "yes"}

    table = benchctl(stack, "status", run["id"])
    assert table.returncode == 0 and "common window" in table.stdout and "share" in table.stdout


def test_cli_bad_input_exits_2_naming_the_field(stack: Stack, pool: str) -> None:
    r = benchctl(stack, "run", "--target", "/mnt/x", "--pool", pool, "--bs", "4x")
    assert r.returncode == 2
    assert "target:" in r.stderr and "workload.bs:" in r.stderr
    r = benchctl(stack, "run", "--target", "scratch", "--iodepth", "many")
    assert r.returncode == 2 and "--iodepth" in r.stderr  # argparse's own message
