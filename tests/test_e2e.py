"""End to end through the API, the real Azurite queue, real agent processes, real fio and
the Cosmos DB stand-in. The core path and the agent faults run twice: against the session's
one API process, and against 3 API instances behind nginx (`benchctl local up
--api-instances 3`; one stack for the module, ``three_instances``), where a run's requests
land on any instance."""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues, poison_queue_name, work_queue_name
from benchctl import localstack
from benchctl.local_state import free_port, remember_port
from benchctl.localstack import Stack
from core.artifacts import ref, unpack_json
from core.errors import NotFound
from core.models import WorkItem
from core.runs.finalize import timeline_of
from tests.conftest import (
    POOL_SPECS,
    TEST_TARGETS,
    AgentFactory,
    run_body,
    wait_state,
    wait_until,
)

# No figure here is held to a known load: the second fio lane (tests/lanes.py).
pytestmark = pytest.mark.fio_beside

# The tests marked so run against 1 API process and against 3 behind nginx.
ONE_AND_THREE = pytest.mark.parametrize(
    "api_instances", [1, 3], indirect=True, ids=["1-instance", "3-instances"]
)


@pytest.fixture(scope="module")
def three_instances(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """3 API instances behind nginx, with the session stack's pools, targets and timings
    (so the conftest's ``pool``, ``agents`` and ``scratch`` work on it unchanged)."""
    localstack.ensure_installed()
    base = tmp_path_factory.mktemp("e2e-three")
    remember_port(base / "stack", free_port())  # not 7071: other stacks start there
    st = localstack.up(
        agents=0,
        targets={},
        directory=base / "stack",
        visibility_timeout=6,
        max_deliveries=3,
        timer_seconds=0.5,
        heartbeat_s=2.0,
        api_instances=3,
        extra_pools=[p for p in POOL_SPECS if p != "default"],
        api_env={"BENCH_TARGETS": json.dumps(TEST_TARGETS)},
    )
    try:
        yield st
    finally:
        localstack.down(base / "stack")


@pytest.fixture
def api_instances(request: pytest.FixtureRequest) -> int:
    return int(getattr(request, "param", 1))


@pytest.fixture
def stack(request: pytest.FixtureRequest, api_instances: int, stack: Stack) -> Stack:
    """The session's stack (1 API process), or the module's 3 instances."""
    if api_instances == 1:
        return stack
    three: Stack = request.getfixturevalue("three_instances")
    return three


def children(pid: int, name: str = "fio") -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        comm = text[text.index("(") + 1 : text.rindex(")")]
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        if ppid == pid and comm == name:
            out.append(int(stat.parent.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def exit_code(pid: int, timeout: float) -> int:
    def reaped() -> tuple[int, int] | None:
        done, status = os.waitpid(pid, os.WNOHANG)
        return (done, status) if done else None

    _, status = wait_until(reaped, timeout, what=f"agent {pid} to exit")
    return os.waitstatus_to_exitcode(status)


def item_of(api: httpx.Client, run_id: str) -> dict[str, Any]:
    item: dict[str, Any] = api.get(f"/api/runs/{run_id}").json()["items"][0]
    return item


@ONE_AND_THREE
def test_run_flows_to_a_stored_result(
    api: httpx.Client,
    store: CosmosStore,
    artifacts: BlobArtifacts,
    agents: AgentFactory,
    pool: str,
    scratch: Path,
) -> None:
    agents()
    run_id = api.post("/api/runs", json=run_body(pool, runtime=3, ramp_time=1)).json()["id"]
    run = wait_state(api, run_id, ("completed", "failed"))
    assert run["state"] == "completed", run
    item = run["items"][0]
    doc = check_stored_result(api, store, artifacts, run, item, scratch, runtime=3)
    agg = run["aggregate"]
    assert agg["clients"] == 1 and agg["read"]["percentiles_exact"] is True
    assert agg["read"]["percentiles_basis"] == "common-window"
    assert agg["read"]["window_ios"] == pytest.approx(doc["read"]["total_ios"], abs=1.0)


def check_stored_result(
    api: httpx.Client,
    store: CosmosStore,
    artifacts: BlobArtifacts,
    run: dict[str, Any],
    item: dict[str, Any],
    scratch: Path,
    *,
    runtime: int,
) -> dict[str, Any]:
    """One client's result of a completed randread run, as the API, Cosmos DB and Blob
    Storage hold it (the core path; tests/test_local_multi.py checks it through 3 API
    instances): the stored document as the adapter reads it back."""
    run_id = run["id"]
    summary = item["result"]
    assert summary["read"]["iops"] > 100 and summary["read"]["clat_ns"]["p99"] > 0
    assert "write" not in summary

    # The document in Cosmos DB itself, as the adapter reads it back.
    doc = store.results.get(run_id, item["id"]).model_dump(mode="json")
    assert doc["id"] == item["id"] and doc["engine"] == "fio"
    assert set(doc["artifacts"]) == {"timeline", "raw", "logs", "counters"}
    # fio's own output and its logs are in Blob Storage beside the result; the timeline is
    # too, or carried in the result when it packs to 8 KiB or less (agent protocol 3).
    raw = unpack_json(artifacts.get(run_id, item["id"], "raw"))
    assert raw["fio version"].startswith("fio-")
    assert doc["read"]["total_ios"] == raw["jobs"][0]["read"]["total_ios"]
    with tarfile.open(fileobj=io.BytesIO(artifacts.get(run_id, item["id"], "logs"))) as tar:
        names = tar.getnames()
    assert "run.fio" in names and any("clat_hist" in n for n in names)
    stored = store.results.get(run_id, item["id"])
    timeline = timeline_of(artifacts, stored)
    assert timeline is not None
    where = "carried" if stored.inline_timeline else "in Blob Storage"
    print("timeline", where, doc["artifacts"]["timeline"]["bytes"], "bytes")
    # Carried (agent protocol 4) or uploaded, fio's output and logs are kept as named, and
    # the document keeps no bytes of them.
    assert stored.inline_artifacts is None
    for name in ("raw", "logs"):
        assert ref(name, artifacts.get(run_id, item["id"], name)) == stored.artifacts[name]
        print(name, doc["artifacts"][name]["bytes"], "bytes")
    try:
        in_blob = (
            artifacts.size(run_id, item["id"], "timeline") == doc["artifacts"]["timeline"]["bytes"]
        )
    except NotFound:
        in_blob = False
    assert in_blob == (stored.inline_timeline is None)  # in one place
    assert timeline.read is not None and timeline.read.hist_rows  # fio's histogram lines kept
    # The measured period is the timeline's, to the millisecond: one log interval per
    # second, each stamped near its nominal second (a little off on a busy machine).
    assert (doc["started_at_ms"], doc["ended_at_ms"]) == (timeline.start_ms, timeline.end_ms)
    # The whole measured runtime (ramp is not logged), its last, partial second included,
    # for which fio writes no log line (issue 26.2).
    assert abs(doc["ended_at_ms"] - doc["started_at_ms"] - runtime * 1000) <= 100
    assert doc["mounts"][0]["path"] == str(scratch) and doc["mounts"][0]["fstype"] != "unknown"
    assert doc["host"]["cpu_count"] >= 1 and doc["workload"]["bs"] == "4k"
    assert list((scratch / ".benchsvc").iterdir()), "fio wrote under the configured mount"

    full = api.get(f"/api/runs/{run_id}/results/{item['id']}").json()
    assert full["raw"] == raw
    assert len(full["series"]["read"]) == runtime  # one point a second, for people
    return doc


def processes_of(agent_id: str) -> list[int]:
    """Every live process whose command line names this agent's work directory: its fio,
    and any process fio forked (a forked child keeps its parent's command line). The whole
    path, temp dir included: another pytest (a lane of `make test`) has agents of the same
    ids under a temp dir of its own."""
    marker = f"{Path(tempfile.gettempdir()) / f'benchagent-{agent_id}'}/".encode()
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker in cmdline.read_bytes() and alive(int(cmdline.parent.name)):
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


@ONE_AND_THREE
def test_sigkill_mid_fio_redelivers_and_writes_one_result(
    api: httpx.Client, store: CosmosStore, agents: AgentFactory, pool: str
) -> None:
    first = agents()
    # numjobs 2: fio would fork a process per job, out of reach of the kernel's
    # parent-death signal; every fio process of the item must end with the agent.
    run_id = api.post("/api/runs", json=run_body(pool, runtime=6, numjobs=2)).json()["id"]
    wait_until(lambda: item_of(api, run_id)["state"] == "running", 30, what="running")
    wait_until(lambda: children(first.pid), 10, what="fio to start")
    fio = wait_until(lambda: processes_of(first.name), 10, what="fio's processes")
    os.kill(first.pid, signal.SIGKILL)
    killed = time.monotonic()
    # An exiting process loses its command line before it is gone: wait for both.
    wait_until(
        lambda: not processes_of(first.name) and not any(alive(p) for p in fio),
        2,
        0.05,
        what="every fio of the item to end",
    )
    assert time.monotonic() - killed < 2

    second = agents()
    run = wait_state(api, run_id, ("completed", "failed"), timeout=60)
    assert run["state"] == "completed", run
    item = run["items"][0]
    assert item["agent_id"] == second.name and item["attempts"] == 2
    assert len(store.results.of_run(run_id)) == 1


@ONE_AND_THREE
def test_duplicate_delivery_writes_one_result(
    api: httpx.Client, store: CosmosStore, queues: WorkQueues, agents: AgentFactory, pool: str
) -> None:
    run_id = api.post("/api/runs", json=run_body(pool)).json()["id"]
    item = store.items.get_item(run_id, f"{run_id}.s0.c0").work_item
    queues.send(item)  # the same message delivered a second time
    agents()
    agents()
    run = wait_state(api, run_id, ("completed", "failed"))
    assert run["state"] == "completed"
    wait_until(lambda: not queues.peek_raw(work_queue_name(pool)), 30, what="queue to drain")
    assert len(store.results.of_run(run_id)) == 1

    queues.send(item)  # and again after completion: dropped at claim
    wait_until(lambda: not queues.peek_raw(work_queue_name(pool)), 30, what="queue to drain")
    assert len(store.results.of_run(run_id)) == 1


def test_item_failing_every_delivery_lands_in_poison_queue(
    api: httpx.Client,
    queues: WorkQueues,
    agents: AgentFactory,
    pool: str,
    scratch: Path,
    stack: Stack,
) -> None:
    # A failure that a retry might get past (here fio itself fails, every time), unlike
    # a missing mount or a full volume, which fail at once (tests/test_agent_honesty.py).
    agents(extra=["--fio", "/bin/false"])
    run_id = api.post("/api/runs", json=run_body(pool)).json()["id"]
    run = wait_state(api, run_id, ("failed", "completed"), timeout=90)
    assert run["state"] == "failed"
    assert "poison queue" in run["error"] and "fio file layout exited 1" in run["error"]
    item = run["items"][0]
    assert len(item["errors"]) == stack.max_deliveries
    raw = queues.peek_raw(poison_queue_name(pool))
    assert len(raw) == 1
    poisoned = WorkItem.model_validate_json(base64.b64decode(raw[0]))
    assert poisoned.run_id == run_id


@ONE_AND_THREE
def test_cancel_stops_a_running_item(
    api: httpx.Client, store: CosmosStore, agents: AgentFactory, pool: str
) -> None:
    agent = agents()
    run_id = api.post("/api/runs", json=run_body(pool, runtime=60)).json()["id"]
    wait_until(lambda: item_of(api, run_id)["state"] == "running", 30, what="running")
    fio = wait_until(lambda: children(agent.pid), 10, what="fio to start")
    started = time.monotonic()
    assert api.delete(f"/api/runs/{run_id}").json()["state"] == "cancelled"
    wait_until(lambda: item_of(api, run_id)["state"] == "cancelled", 20, what="item cancelled")
    wait_until(lambda: not any(alive(p) for p in fio), 10, what="fio to stop")
    assert time.monotonic() - started < 15
    assert store.results.of_run(run_id) == []


def test_first_sigterm_finishes_the_item(
    api: httpx.Client, agents: AgentFactory, pool: str
) -> None:
    agent = agents()
    run_id = api.post("/api/runs", json=run_body(pool, runtime=4)).json()["id"]
    wait_until(lambda: item_of(api, run_id)["state"] == "running", 30, what="running")
    os.kill(agent.pid, signal.SIGTERM)
    assert exit_code(agent.pid, 30) == 0
    assert item_of(api, run_id)["state"] == "completed"


def test_second_sigterm_stops_now_and_hands_the_item_back(
    api: httpx.Client, queues: WorkQueues, agents: AgentFactory, pool: str
) -> None:
    agent = agents()
    run_id = api.post("/api/runs", json=run_body(pool, runtime=60)).json()["id"]
    wait_until(lambda: item_of(api, run_id)["state"] == "running", 30, what="running")
    wait_until(lambda: children(agent.pid), 10, what="fio to start")
    os.kill(agent.pid, signal.SIGTERM)
    time.sleep(0.5)
    os.kill(agent.pid, signal.SIGTERM)
    assert exit_code(agent.pid, 10) == 0
    # Released with visibility 0: visible again at once, not after the timeout.
    raw = wait_until(lambda: queues.peek_raw(work_queue_name(pool)), 3, what="message back")
    assert json.loads(base64.b64decode(raw[0]))["run_id"] == run_id


@pytest.mark.parametrize("signame", ["SIGTERM"])
def test_agent_rejects_bad_config(
    signame: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # benchagent's entry point (`sys.exit(main())`) in this process: it refuses before it
    # reaches for a queue, an API or fio, so no agent process need start (the fio lane).
    from agent.__main__ import main

    argv = ["--api-url", "http://127.0.0.1:1", "--queue-uri", "http://127.0.0.1:1/x"]
    assert main([*argv, "--mount", "Bad=/tmp"]) == 2
    assert "mount alias 'Bad'" in capsys.readouterr().err
