"""No item ends an agent (issue 24, point 2): a full, inode-starved or read-only target
makes the run fail on its first delivery with the OS's own words, the agent that ran it
lives on and runs the next item, and nothing is left on the target. Real tmpfs mounts, a
real read-only remount, real fio, real agents through the real stack."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.queue import WorkQueues
from agent.failures import Failure, item_failure
from agent.layout import ItemFailed
from agent.metadata import check_tree_space
from core.engines.fio_check import permanent_failure
from core.models import Metadata, Workload
from tests.conftest import AgentFactory, TmpfsFactory, run_body, wait_state, wait_until
from tests.test_agent_honesty import failed_at_first_delivery, on, submit

KIB = 1 << 10


def metadata_body(pool: str, target: str, **md: Any) -> dict[str, Any]:
    meta = {"ops": ["create", "delete"], "files_per_dir": 200, **md}
    return {
        "target": target,
        "pool": pool,
        "workload": {"numjobs": 2, "runtime": 10, "metadata": meta},
    }


def files_on(mount: Path) -> list[Path]:
    return [p for p in mount.rglob("*") if not p.is_dir()]


def fill_up(path: Path) -> None:
    """Another writer takes every free byte of the filesystem."""
    with path.open("wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\1" * (64 * KIB))
        except OSError as e:
            assert e.errno == errno.ENOSPC


def runs_next_item(api: httpx.Client, pool: str, target: str) -> None:
    run = wait_state(
        api, submit(api, on(target, run_body(pool, size="2m"))), ("completed", "failed"), 60
    )
    assert run["state"] == "completed", run["error"]


def test_an_inode_starved_target_fails_the_run_at_once_and_runs_no_later_phase(
    api: httpx.Client,
    queues: WorkQueues,
    agents: AgentFactory,
    pool: str,
    tmp_path: Path,
    tmpfs: TmpfsFactory,
) -> None:
    """The reported case: 2 jobs x 200 files on a tmpfs of 60 inodes went through five
    retryable ENOSPC attempts to the poison queue, and its delete phase still ran."""
    vol = tmpfs(tmp_path / "vol", size="16m", nr_inodes=60)
    free = os.statvfs(vol).f_favail
    agent = agents(targets={"vol1": str(vol)})
    run = failed_at_first_delivery(api, queues, pool, submit(api, metadata_body(pool, "vol1")))
    # 400 files; .benchsvc, md-<pool>.vol1, the run, c0 and the jobs' j0 and j1.
    assert (
        run["error"] == f"the tree needs 406 inodes (400 files, 6 directories), {free} free on vol1"
    )
    assert [i["step"] for i in run["items"]] == [0], "no delete phase after a failed create"
    assert [s["point"] for s in run["steps"]] == ["create", "delete"]
    assert files_on(vol) == []
    assert agent.alive()
    runs_next_item(api, pool, "vol1")


def test_a_full_target_during_a_phase_fails_it_with_the_os_message_and_the_agent_lives(
    api: httpx.Client,
    queues: WorkQueues,
    agents: AgentFactory,
    pool: str,
    tmp_path: Path,
    tmpfs: TmpfsFactory,
) -> None:
    """The reported crash: ENOSPC while the agent writes each created file's bytes
    (``file_size``) after the create phase ended the agent process. Here the tree fits
    when the phase starts (400 x 4 KiB of 4 MiB) and another writer fills the filesystem
    while fio creates the files (100 creates/s)."""
    vol = tmpfs(tmp_path / "vol", size="4m")
    agent = agents(targets={"vol1": str(vol)})
    body = metadata_body(pool, "vol1", file_size=4096)
    body["workload"]["rate_iops"] = 100
    run_id = submit(api, body)
    tree = vol / ".benchsvc" / f"md-{pool}.vol1" / run_id / "c0"
    wait_until(lambda: any(vol.rglob("j*/f*")), 30, 0.05, what="fio creating files")
    fill_up(vol / "other-writer")
    run = failed_at_first_delivery(api, queues, pool, run_id)
    assert run["error"].startswith(f"writing the 4,096 bytes of {tree}/j"), run["error"]
    assert run["error"].endswith(": [Errno 28] No space left on device"), run["error"]
    assert [i["step"] for i in run["items"]] == [0], "no delete phase after a failed create"
    assert files_on(vol) == [vol / "other-writer"], "the run's tree is removed"
    assert agent.alive()
    (vol / "other-writer").unlink()
    runs_next_item(api, pool, "vol1")


def test_a_read_only_target_fails_the_run_at_once_and_the_agent_lives(
    api: httpx.Client,
    queues: WorkQueues,
    agents: AgentFactory,
    pool: str,
    tmp_path: Path,
    tmpfs: TmpfsFactory,
) -> None:
    """The reported crash: EROFS from the space check's mkdir ended the agent; each
    redelivery ended another."""
    vol = tmpfs(tmp_path / "vol", size="32m")
    agent = agents(targets={"vol1": str(vol)})
    subprocess.run(["mount", "-o", "remount,ro", str(vol)], check=True)
    data = failed_at_first_delivery(api, queues, pool, submit(api, on("vol1", run_body(pool))))
    where = vol / ".benchsvc"  # mkdir -p fails on the first directory it makes
    assert data["error"] == (
        f"making the data directory on vol1: [Errno 30] Read-only file system: '{where}'"
    )
    meta = failed_at_first_delivery(api, queues, pool, submit(api, metadata_body(pool, "vol1")))
    assert meta["error"].startswith("making the metadata tree: [Errno 30] Read-only file system")
    assert [i["step"] for i in meta["items"]] == [0]
    assert agent.alive()
    subprocess.run(["mount", "-o", "remount,rw", str(vol)], check=True)
    runs_next_item(api, pool, "vol1")


# ---- classification (pure) and the space check on real tmpfs ------------------------------


@pytest.mark.parametrize(
    ("code", "permanent"),
    [
        (errno.ENOSPC, True),
        (errno.EDQUOT, True),
        (errno.EROFS, True),
        (errno.EACCES, True),
        (errno.EPERM, True),
        (errno.EIO, False),
        (errno.ETIMEDOUT, False),
        (errno.ESTALE, False),
    ],
)
def test_an_os_error_is_permanent_by_its_cause(code: int, permanent: bool) -> None:
    e = OSError(code, os.strerror(code), "/mnt/share/.benchsvc/a/f1")
    failure = item_failure(e, "writing")
    assert failure.permanent is permanent
    assert (
        failure.message
        == f"writing: [Errno {code}] {os.strerror(code)}: '/mnt/share/.benchsvc/a/f1'"
    )
    # fio's words for the same causes (its per-job error, its messages) agree.
    assert (
        permanent_failure([f"fio job a ended with error {code} ({os.strerror(code)})"]) is permanent
    )


def test_any_other_exception_is_an_internal_error_a_retry_may_pass() -> None:
    failure = item_failure(KeyError("scratch"))
    assert failure == Failure("internal error in the agent: KeyError: 'scratch'", False)


def test_the_tree_space_check_counts_bytes_and_inodes(tmp_path: Path, tmpfs: TmpfsFactory) -> None:
    vol = tmpfs(tmp_path / "vol", size="1m", nr_inodes=1000)
    roots = {"vol1": vol / ".benchsvc" / "md-p.vol1" / "r" / "c0"}

    def create(files: int, size: int, numjobs: int = 2) -> Workload:
        md = Metadata(files_per_dir=files, file_size=size, op="create")
        return Workload(numjobs=numjobs, metadata=md)

    check_tree_space(create(100, 4096), roots)  # 200 pages of 256
    with pytest.raises(ItemFailed) as e:
        check_tree_space(create(200, 100), roots)  # 100 bytes take a page: 400 of 256
    assert e.value.permanent
    assert str(e.value) == "the tree needs 1.6 MiB (400 files of 100 bytes), 1 MiB free on vol1"
    check_tree_space(create(400, 0), roots)  # empty files take no page, and 806 inodes fit
    with pytest.raises(ItemFailed) as e:
        check_tree_space(create(500, 0), roots)
    free = os.statvfs(vol).f_favail
    assert (
        str(e.value)
        == f"the tree needs 1,006 inodes (1,000 files, 6 directories), {free} free on vol1"
    )
    assert files_on(vol) == [] and list(vol.iterdir()) == [], "the check writes nothing"
