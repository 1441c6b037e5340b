"""The agent refuses to store what is not a measurement of what was asked, end to end:
real agents, real fio, real tmpfs mounts, the real Azurite, the Cosmos DB stand-in."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues, poison_queue_name, work_queue_name
from agent.__main__ import main as agent_main
from agent.layout import first_hole
from tests.conftest import AgentFactory, TmpfsFactory, run_body, wait_state, wait_until
from tests.test_e2e import children, item_of

# No figure here is held to a known load: the second fio lane (tests/lanes.py).
pytestmark = pytest.mark.fio_beside

MIB = 1 << 20


def on(target: str, body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "target": target}


def submit(api: httpx.Client, body: dict[str, Any]) -> str:
    r = api.post("/api/runs", json=body)
    assert r.status_code == 202, r.text
    run_id: str = r.json()["id"]
    return run_id


def failed_at_first_delivery(
    api: httpx.Client, queues: WorkQueues, pool: str, run_id: str
) -> dict[str, Any]:
    run = wait_state(api, run_id, ("failed", "completed"), timeout=60)
    assert run["state"] == "failed", run
    item = run["items"][0]
    assert item["attempts"] == 1 and len(item["errors"]) == 1, item
    wait_until(lambda: not queues.peek_raw(work_queue_name(pool)), 10, what="message deleted")
    assert queues.peek_raw(poison_queue_name(pool)) == []
    return run


# ---- A: a failed measurement is never a result (issue 11, point 5) ----------------------


def test_a_job_that_does_not_fit_fails_at_once_saying_why(
    api: httpx.Client,
    store: CosmosStore,
    queues: WorkQueues,
    agents: AgentFactory,
    pool: str,
    tmp_path: Path,
    tmpfs: TmpfsFactory,
) -> None:
    tiny = tmpfs(tmp_path / "tiny", size="16m")
    agents(targets={"vol1": str(tiny)})
    started = time.monotonic()
    run_id = submit(api, on("vol1", run_body(pool, size="24m")))
    run = failed_at_first_delivery(api, queues, pool, run_id)
    assert run["error"] == "needs 24 MiB, 16 MiB free on vol1"
    assert time.monotonic() - started < 20  # not after 3 deliveries and their delays
    assert store.results.of_run(run_id) == []
    assert not list(tiny.rglob("vol1.*")), "nothing was laid out"


def test_a_read_after_a_failed_layout_reads_real_data(
    api: httpx.Client,
    store: CosmosStore,
    agents: AgentFactory,
    pool: str,
    tmp_path: Path,
    tmpfs: TmpfsFactory,
) -> None:
    """The reported bug's second half: a layout that ran out of space left its file at full
    length with holes; fio accepts such a file as laid out, and reads the holes."""
    tiny = tmpfs(tmp_path / "tiny", size="32m")
    agent = agents(targets={"vol1": str(tiny)})
    data = tiny / ".benchsvc" / agent.name
    data.mkdir(parents=True)
    leftover = data / "vol1.0.0"
    with leftover.open("wb") as f:
        f.write(b"\1" * MIB)
        f.truncate(24 * MIB)
    run_id = submit(api, on("vol1", run_body(pool, size="24m", runtime=2)))
    run = wait_state(api, run_id, ("failed", "completed"), timeout=60)
    assert run["state"] == "completed", (run.get("error"), run["items"])
    assert first_hole(leftover, 24 * MIB) is None
    assert os.stat(leftover).st_blocks * 512 >= 24 * MIB
    assert len(store.results.of_run(run_id)) == 1


def test_fio_stopped_early_fails_the_attempt_with_fios_figures(
    api: httpx.Client, store: CosmosStore, agents: AgentFactory, pool: str
) -> None:
    agent = agents()
    run_id = submit(api, run_body(pool, runtime=6))
    wait_until(lambda: item_of(api, run_id)["state"] == "running", 30, what="running")
    fio = wait_until(lambda: children(agent.pid), 10, what="fio to start")
    time.sleep(1.5)
    os.kill(fio[0], signal.SIGTERM)  # fio writes its JSON for the 1.5 s it ran
    run = wait_state(api, run_id, ("failed", "completed"), timeout=90)
    item = run["items"][0]
    first = item["errors"][0]["message"]
    assert first.startswith("not a valid measurement: fio exited"), first
    assert "of the 6 s asked" in first
    # The retry measures properly: one result, of the full runtime.
    assert run["state"] == "completed" and item["attempts"] == 2, run
    (result,) = store.results.of_run(run_id)
    assert result.read is not None and result.read.runtime_ms >= 5400


def test_a_missing_mount_fails_on_first_delivery(
    api: httpx.Client,
    queues: WorkQueues,
    agents: AgentFactory,
    pool: str,
    scratch: Path,
) -> None:
    # Submitted before the agent registers: once it has, the service itself refuses a run
    # on a mount no agent of the pool has (tests/test_fleet.py); this is the agent's own check.
    run_id = submit(api, run_body(pool))
    agents(targets={"other": str(scratch)})  # has no mount called scratch
    run = failed_at_first_delivery(api, queues, pool, run_id)
    assert "has no mount 'scratch' (it has: other)" in run["error"]


# ---- C: the agent refuses to measure the wrong thing (issue 13, point 2) -----------------


def test_declared_tmpfs_is_measured_and_recorded(
    api: httpx.Client,
    store: CosmosStore,
    agents: AgentFactory,
    pool: str,
    tmp_path: Path,
    tmpfs: TmpfsFactory,
) -> None:
    vol = tmpfs(tmp_path / "vol", size="32m", source="benchvol")
    agents(targets={"vol1": f"{vol},fstype=tmpfs,source=benchvol"})
    run_id = submit(api, on("vol1", run_body(pool)))
    run = wait_state(api, run_id, ("failed", "completed"), timeout=60)
    assert run["state"] == "completed", (run.get("error"), run["items"])
    (result,) = store.results.of_run(run_id)
    mount = result.mounts[0]
    assert (mount.fstype, mount.source, mount.mount_point) == (
        "tmpfs",
        "benchvol",
        str(vol),
    )


def test_agent_with_no_usable_mount_refuses_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # benchagent's entry point (`sys.exit(main())`) in this process: it refuses before it
    # reaches for a queue, an API or fio, so no agent process need start (the fio lane).
    d = tmp_path / "share"
    d.mkdir()
    argv = ["--api-url", "http://127.0.0.1:1", "--queue-uri", "http://127.0.0.1:1/x"]
    assert agent_main([*argv, "--mount", f"vol1={d},fstype=nfs,source=10.0.0.4:/vol1"]) == 2
    err = capsys.readouterr().err
    assert f"no usable mount: mount vol1: {d} is not a mount point" in err
    assert "declared nfs from 10.0.0.4:/vol1" in err


def test_an_agent_whose_mount_is_not_what_it_says_hands_the_item_to_one_whose_is(
    api: httpx.Client,
    store: CosmosStore,
    agents: AgentFactory,
    pool: str,
    scratch: Path,
    tmp_path: Path,
    tmpfs: TmpfsFactory,
) -> None:
    """Issue 13.2: a VM whose share failed to mount measures nothing on its own disk; its
    attempt fails saying why and the item goes back, so a VM whose mount is right serves it."""
    share = tmp_path / "share"
    share.mkdir()  # a share that failed to mount: a plain directory at its path
    # Submitted before any agent registers (the registry would show vol1 unusable and the
    # run would be refused at intake): this is the agent's own check.
    run_id = submit(api, on("vol1", run_body(pool)))
    agents(targets={"scratch": str(scratch), "vol1": f"{share},fstype=nfs"})
    item = wait_until(lambda: (i := item_of(api, run_id))["errors"] and i, 30, what="a try")
    assert (
        f"cannot use its mount: mount vol1: {share} is not a mount point"
        in item["errors"][0]["message"]
    )
    assert item["state"] != "failed", "not final: another VM may serve it"
    assert not (share / ".benchsvc").exists(), "nothing was written on the VM's own disk"
    good = tmpfs(tmp_path / "good", size="32m")
    agents(targets={"scratch": str(scratch), "vol1": f"{good},fstype=tmpfs"})
    run = wait_state(api, run_id, ("failed", "completed"), timeout=60)
    assert run["state"] == "completed", (run.get("error"), run["items"])
    (result,) = store.results.of_run(run_id)
    assert result.mounts[0].fstype == "tmpfs"
    # The first agent's usable mount still serves (either agent may take this one).
    ok = wait_state(api, submit(api, run_body(pool)), ("failed", "completed"), timeout=60)
    assert ok["state"] == "completed", (ok.get("error"), ok["items"])


def test_unmount_during_a_run_fails_the_item_until_the_mount_is_back(
    api: httpx.Client,
    store: CosmosStore,
    agents: AgentFactory,
    pool: str,
    tmp_path: Path,
    tmpfs: TmpfsFactory,
) -> None:
    vol = tmpfs(tmp_path / "vol", size="32m")
    agent = agents(targets={"vol1": f"{vol},fstype=tmpfs"})
    run_id = submit(api, on("vol1", run_body(pool, runtime=4)))
    wait_until(lambda: item_of(api, run_id)["state"] == "running", 30, what="running")
    wait_until(lambda: children(agent.pid), 10, what="fio to start")
    time.sleep(1)
    subprocess.run(["umount", "-l", str(vol)], check=True)  # fio keeps its open files
    item = wait_until(
        lambda: (i := item_of(api, run_id))["errors"] and i, 30, what="the attempt to fail"
    )
    message = item["errors"][0]["message"]
    assert message.startswith(f"mount vol1 changed during the run (it was tmpfs tmpfs at {vol}")
    assert "the measurement is discarded" in message
    # With no usable mount the agent takes no item: it waits in the queue...
    time.sleep(4)
    item = item_of(api, run_id)
    assert (item["state"], item["attempts"], len(item["errors"])) == ("queued", 1, 1), item
    assert store.results.of_run(run_id) == []
    # ...until the mount is back.
    tmpfs(vol, size="32m")
    run = wait_state(api, run_id, ("failed", "completed"), timeout=60)
    assert run["state"] == "completed" and run["items"][0]["attempts"] == 2, run
    (result,) = store.results.of_run(run_id)
    assert result.mounts[0].fstype == "tmpfs"
