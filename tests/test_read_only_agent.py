"""Read-only targets are never written (issue 12, point 5), end to end: real agents, real
fio, real tmpfs mounts remounted read-only, the real API and Azurite, the Cosmos DB stand-in.

The registry's "archive" target (tests/conftest.py) is read-only and names the data set
ARCHIVE_DATASET: 4 files bench-data/data.{0..3} of 8 MiB, prepared by each test."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues, work_queue_name
from agent.dataset import file_problem, read_only_files
from agent.layout import ItemFailed
from core.models import DataSet, WorkItem, Workload
from tests.conftest import ARCHIVE_DATASET, AgentFactory, TmpfsFactory, run_body, wait_state
from tests.test_agent_honesty import failed_at_first_delivery, submit
from tests.test_read_only import listing

MIB = 1 << 20
ARCHIVE = DataSet.model_validate(ARCHIVE_DATASET)


def prepare(mount: Path, *, sparse: tuple[int, ...] = (), missing: tuple[int, ...] = ()) -> None:
    """The data set as its owner would write it: every file full of data, except the
    ``sparse`` ones (full length, no data) and the ``missing`` ones."""
    (mount / ARCHIVE.directory).mkdir()
    for i in range(ARCHIVE.files):
        path = mount / ARCHIVE.file_path(i)
        if i in sparse:
            with path.open("wb") as f:
                f.truncate(ARCHIVE.file_size_bytes)
        elif i not in missing:
            path.write_bytes(os.urandom(ARCHIVE.file_size_bytes))


def remount_read_only(mount: Path) -> None:
    """From here on any write on the mount, even creating a directory, fails with EROFS."""
    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
    with pytest.raises(OSError, match="Read-only file system"):
        (mount / ".benchsvc").mkdir()


def item_for(client: int, numjobs: int, **workload: Any) -> WorkItem:
    return WorkItem(
        run_id="r-" + "a" * 32,
        item_id="r-" + "a" * 32 + f".s0.c{client}",
        step=0,
        client=client,
        clients=client + 1,
        pool="default",
        targets=["archive"],
        engine="fio",
        workload=Workload(numjobs=numjobs, size="8m", **workload),
        datasets={"archive": ARCHIVE},
    )


def queued(queues: WorkQueues, pool: str) -> int:
    return queues.approximate_count(work_queue_name(pool))


def runs_in(api: httpx.Client, pool: str) -> list[str]:
    runs = api.get("/api/runs", params={"limit": 200}).json()["runs"]
    return [r["id"] for r in runs if r["pool"] == pool]


# ---- the agent's checks, on a real filesystem --------------------------------------------


def test_the_agent_names_each_file_a_job_cannot_read(tmp_path: Path, tmpfs: TmpfsFactory) -> None:
    mount = tmpfs(tmp_path / "archive", size="48m")
    prepare(mount, sparse=(1,), missing=(2,))
    (mount / ARCHIVE.file_path(3)).write_bytes(os.urandom(MIB))  # short
    root = str(mount)
    assert file_problem(root, ARCHIVE.file_path(0), 8 * MIB) is None
    assert file_problem(root, ARCHIVE.file_path(1), 8 * MIB) == (
        "has a hole at byte 0: a read there would measure no storage"
    )
    assert file_problem(root, ARCHIVE.file_path(2), 8 * MIB) == "is missing"
    assert file_problem(root, ARCHIVE.file_path(3), 8 * MIB) == (
        "holds 1,048,576 bytes; the job reads 8,388,608"
    )
    (mount / "bench-data" / "out").symlink_to("/etc/hostname")
    assert str(file_problem(root, "bench-data/out", 1)).startswith("leads out of the mount")
    (mount / "bench-data" / "dir").mkdir()
    assert file_problem(root, "bench-data/dir", 1) == "is not a regular file"

    paths = {"archive": root}.__getitem__
    with pytest.raises(ItemFailed) as failed:
        read_only_files(item_for(0, 4), paths, tmp_path / "work")
    assert failed.value.permanent
    assert str(failed.value) == (
        "read-only target data set not usable (nothing was written): archive: "
        "bench-data/data.1 has a hole at byte 0: a read there would measure no storage; "
        "archive: bench-data/data.2 is missing; archive: bench-data/data.3 holds 1,048,576 "
        "bytes; the job reads 8,388,608"
    )
    assert read_only_files(item_for(0, 1), paths, tmp_path / "work") == {
        "archive": [str(mount / "bench-data" / "data.0")]
    }
    with pytest.raises(ItemFailed, match="client 1 with 4 jobs reads files 4 to 7"):
        read_only_files(item_for(1, 4), paths, tmp_path / "work")
    with pytest.raises(ItemFailed, match=r"work directory .* is on read-only target archive"):
        read_only_files(item_for(0, 1), paths, mount / "work")
    with pytest.raises(
        ItemFailed, match=r"refusing to write on read-only target archive \(rw=write\)"
    ):
        read_only_files(item_for(0, 1, rw="write"), paths, tmp_path / "work")


# ---- end to end --------------------------------------------------------------------------


def test_a_read_only_mount_is_measured_from_its_data_set_and_left_untouched(
    api: httpx.Client,
    store: CosmosStore,
    artifacts: BlobArtifacts,
    agents: AgentFactory,
    pool: str,
    tmp_path: Path,
    tmpfs: TmpfsFactory,
) -> None:
    mount = tmpfs(tmp_path / "archive", size="40m")
    prepare(mount)
    remount_read_only(mount)
    before = listing(mount)
    for _ in range(2):
        agents(targets={"archive": f"{mount},fstype=tmpfs"})
    body = {**run_body(pool, numjobs=2, size="8m"), "target": "archive", "clients": 2}
    run_id = submit(api, body)
    run = wait_state(api, run_id, ("completed", "failed"), timeout=90)
    assert run["state"] == "completed", run
    assert store.runs.get(run_id).datasets == {"archive": ARCHIVE}

    assert listing(mount) == before  # inodes, sizes, mtimes and blocks as they were
    read: dict[int, list[str]] = {}
    for stored in store.results.of_run(run_id):
        result = stored.model_dump(mode="json")
        got = result["read"]
        assert result["write"] is None and got["total_ios"] > 0
        assert got["io_bytes"] == got["total_ios"] * 4096  # 4 KiB reads, counted by fio
        print(f"client {result['client']}: {got['iops']:,.0f} IOPS, {got['total_ios']:,} reads")
        logs = artifacts.get(run_id, result["item_id"], "logs")
        with tarfile.open(fileobj=io.BytesIO(logs)) as tar:
            member = tar.extractfile("run.fio")
            assert member is not None
            job = member.read().decode()
        read[result["client"]] = [
            line.removeprefix(f"filename={mount}/")
            for line in job.splitlines()
            if "filename=" in line
        ]
        assert "allow_file_create=0" in job and "directory=" not in job
    # each client read files of its own: client c, job j reads file c x numjobs + j
    assert read == {
        0: ["bench-data/data.0", "bench-data/data.1"],
        1: ["bench-data/data.2", "bench-data/data.3"],
    }


def test_a_read_only_target_without_a_data_set_is_refused_and_nothing_is_enqueued(
    api: httpx.Client, queues: WorkQueues, pool: str
) -> None:
    runs, messages = runs_in(api, pool), queued(queues, pool)
    r = api.post("/api/runs", json={**run_body(pool), "target": "golden"})
    assert r.status_code == 403, r.text
    assert r.json()["errors"] == [
        {
            "field": "target",
            "message": "target golden is read-only and its registry entry names no prepared "
            "data set (dataset): a run would lay out its files there",
        }
    ]
    too_many = {**run_body(pool, numjobs=3), "target": "archive", "clients": 2}
    r = api.post("/api/runs", json=too_many)
    assert r.status_code == 403, r.text
    assert [e["field"] for e in r.json()["errors"]] == ["clients"]
    too_big = {**run_body(pool, size="16m"), "target": "archive"}
    r = api.post("/api/runs", json=too_big)
    assert r.status_code == 403 and r.json()["errors"][0]["field"] == "workload.size", r.text
    assert runs_in(api, pool) == runs and queued(queues, pool) == messages == 0


def test_a_missing_or_sparse_data_set_file_fails_the_item_at_once(
    api: httpx.Client,
    queues: WorkQueues,
    agents: AgentFactory,
    pool: str,
    tmp_path: Path,
    tmpfs: TmpfsFactory,
) -> None:
    # Read-write here: what keeps the files untouched is the agent, not the mount.
    mount = tmpfs(tmp_path / "archive", size="40m")
    prepare(mount, sparse=(0,), missing=(3,))
    before = listing(mount)
    agents(targets={"archive": f"{mount},fstype=tmpfs"})

    run = failed_at_first_delivery(
        api, queues, pool, submit(api, {**run_body(pool, size="8m"), "target": "archive"})
    )
    assert run["error"] == (
        "read-only target data set not usable (nothing was written): archive: "
        "bench-data/data.0 has a hole at byte 0: a read there would measure no storage"
    )
    body = {**run_body(pool, size="8m", numjobs=4), "target": "archive"}
    run = failed_at_first_delivery(api, queues, pool, submit(api, body))
    assert "archive: bench-data/data.3 is missing" in run["error"], run["error"]
    assert listing(mount) == before


def test_the_working_set_cap_is_refused_at_the_api(
    api: httpx.Client, queues: WorkQueues, pool: str
) -> None:
    """The run that filled a mount: 256 jobs x 16 TiB; the local stack's caller is an
    admin (64 TiB per client)."""
    runs, messages = runs_in(api, pool), queued(queues, pool)
    r = api.post("/api/runs", json=run_body(pool, size="16t", numjobs=256))
    assert r.status_code == 403, r.text
    assert r.json()["errors"] == [
        {
            "field": "workload.numjobs",
            "message": "the working set is 256 files x 16t = 4,096 TiB per client; role admin "
            "may use 64 TiB at most",
        }
    ]
    assert runs_in(api, pool) == runs and queued(queues, pool) == messages == 0
