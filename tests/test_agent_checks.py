"""The agent's own checks before and after fio, on real filesystems: declared mounts
against real tmpfs mounts and plain directories, free space and holes on a real small
tmpfs, and fio's real layout."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from agent.config import AgentConfig, MountSpec
from agent.fio_runner import FioProcess
from agent.hostfacts import mount_facts
from agent.layout import (
    ItemFailed,
    check_space,
    file_state,
    first_hole,
    incomplete_files,
    lay_out,
    to_allocate,
)
from agent.mounts import MountWatch, mount_problem, read_mountinfo, same_mount
from core.engines.fio_check import fio_messages, permanent_failure
from core.models import Workload
from tests.conftest import TmpfsFactory

MIB = 1 << 20


# ---- the mount model ---------------------------------------------------------------------


def test_mount_is_a_path_or_an_object(tmp_path: Path) -> None:
    config = tmp_path / "agent.json"
    config.write_text(
        json.dumps(
            {
                "api_url": "http://127.0.0.1:1",
                "queue_uri": "http://127.0.0.1:1/q",
                "mounts": {
                    "plain": str(tmp_path),
                    "share": {"path": str(tmp_path), "fstype": "nfs", "source": "10.0.0.4:/v1"},
                    "disk": {"path": str(tmp_path), "fstype": "ext4"},
                },
            }
        )
    )
    c = AgentConfig.load(str(config), {})
    assert c.mounts["plain"] == MountSpec(path=str(tmp_path))
    assert not c.mounts["plain"].declared
    assert c.mounts["share"].fstype == "nfs" and c.mounts["share"].source == "10.0.0.4:/v1"
    assert c.mounts["disk"].declared and c.mounts["disk"].source is None
    assert c.path("share") == str(tmp_path)


def test_bad_mount_objects_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"mounts\.share\.fstype"):
        MountSpec.parse("share", {"path": str(tmp_path), "fstype": "NFS; rm"})
    with pytest.raises(ValueError, match=r"mounts\.share\.bogus"):
        MountSpec.parse("share", {"path": str(tmp_path), "bogus": 1})
    with pytest.raises(ValueError, match=r"mounts\.share\.path"):
        MountSpec.parse("share", {"fstype": "nfs"})


def test_mount_flag() -> None:
    assert MountSpec.from_flag("vol1=/mnt/v") == ("vol1", MountSpec(path="/mnt/v"))
    alias, spec = MountSpec.from_flag("vol1=/mnt/v,fstype=nfs4,source=10.0.0.4:/vol1")
    assert alias == "vol1" and spec == MountSpec(
        path="/mnt/v", fstype="nfs4", source="10.0.0.4:/vol1"
    )
    for bad in ("vol1", "vol1=", "vol1=/m,type=nfs", "vol1=/m,fstype=nfs,fstype=cifs"):
        with pytest.raises(ValueError, match="--mount"):
            MountSpec.from_flag(bad)


# ---- is the mount what it says -----------------------------------------------------------


def test_tmpfs_declared_tmpfs_passes(tmp_path: Path, tmpfs: TmpfsFactory) -> None:
    path = tmpfs(tmp_path / "vol", source="benchsrc")
    info = read_mountinfo()
    assert mount_problem("vol", MountSpec(path=str(path), fstype="tmpfs"), info) is None
    spec = MountSpec(path=str(path), fstype="tmpfs", source="benchsrc")
    assert mount_problem("vol", spec, info) is None
    wrong = MountSpec(path=str(path), fstype="tmpfs", source="elsewhere")
    assert mount_problem("vol", wrong, info) == (
        f"mount vol: {path} is mounted from benchsrc, declared tmpfs from elsewhere"
    )
    nfs = MountSpec(path=str(path), fstype="nfs")
    assert mount_problem("vol", nfs, info) == (
        f"mount vol: {path} is tmpfs from benchsrc, declared nfs"
    )


def test_plain_directory_declared_nfs_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "share"
    d.mkdir()
    info = read_mountinfo()
    problem = mount_problem("share", MountSpec(path=str(d), fstype="nfs"), info)
    under = mount_facts("share", str(d))
    assert problem == (
        f"mount share: {d} is not a mount point (it is a directory on {under.fstype} "
        f"{under.source} at {under.mount_point}); declared nfs"
    )
    # Undeclared, the directory is used as it is (today's form); a missing one never.
    assert mount_problem("share", MountSpec(path=str(d)), info) is None
    gone = MountSpec(path=str(tmp_path / "missing"))
    assert mount_problem("x", gone, info) == f"mount x: {tmp_path / 'missing'} is not a directory"


def test_the_mount_on_top_is_the_one_checked(tmp_path: Path, tmpfs: TmpfsFactory) -> None:
    path = tmpfs(tmp_path / "vol", source="below")
    tmpfs(path, source="above")
    assert mount_facts("vol", str(path)).source == "above"
    spec = MountSpec(path=str(path), fstype="tmpfs", source="above")
    assert mount_problem("vol", spec, read_mountinfo()) is None


def test_watch_sees_a_mount_go_and_come_back(tmp_path: Path, tmpfs: TmpfsFactory) -> None:
    path = tmpfs(tmp_path / "vol")
    plain = tmp_path / "plain"
    plain.mkdir()
    watch = MountWatch(
        {
            "vol": MountSpec(path=str(path), fstype="tmpfs"),
            "plain": MountSpec(path=str(plain)),
        }
    )
    assert watch.usable() == ["vol", "plain"]
    before = watch.facts("vol")
    subprocess.run(["umount", str(path)], check=True)
    assert watch.usable() == ["plain"]
    assert not same_mount(before, watch.facts("vol"))
    tmpfs(path)
    assert watch.usable() == ["vol", "plain"]


# ---- space and holes ---------------------------------------------------------------------


def test_sparse_file_has_a_hole_and_needs_its_rest(tmp_path: Path, tmpfs: TmpfsFactory) -> None:
    fs = tmpfs(tmp_path / "t")
    f = fs / "x"
    with f.open("wb") as out:
        out.write(b"\1" * MIB)
        out.truncate(4 * MIB)
    assert first_hole(f, 4 * MIB) == MIB
    state = file_state(str(f), 4 * MIB)
    assert not state.complete and state.allocated == MIB
    assert to_allocate(state, 4 * MIB) == 3 * MIB
    f.write_bytes(b"\1" * 4 * MIB)
    assert first_hole(f, 4 * MIB) is None
    assert to_allocate(file_state(str(f), 4 * MIB), 4 * MIB) == 0
    assert to_allocate(file_state(str(fs / "none"), 4 * MIB), 4 * MIB) == 4 * MIB


def test_a_job_that_does_not_fit_is_refused_before_layout(
    tmp_path: Path, tmpfs: TmpfsFactory
) -> None:
    fs = tmpfs(tmp_path / "tiny", size="16m")
    data = {"tiny": fs / ".benchsvc" / "a"}
    with pytest.raises(ItemFailed) as e:
        check_space(Workload(size="24m"), data)
    assert str(e.value) == "needs 24 MiB, 16 MiB free on tiny" and e.value.permanent
    # size x numjobs x mounts: two mounts on one filesystem share its free space.
    two = {"tiny": fs / "a", "tiny2": fs / "b"}
    with pytest.raises(ItemFailed, match="needs 20 MiB, 16 MiB free on tiny, tiny2"):
        check_space(Workload(size="5m", numjobs=2), two)
    check_space(Workload(size="4m", numjobs=2), two)  # 16 MiB: fits exactly


@pytest.mark.fio
def test_a_rerun_over_laid_out_files_needs_no_new_space(
    tmp_path: Path, tmpfs: TmpfsFactory
) -> None:
    fs = tmpfs(tmp_path / "tiny", size="16m")
    w = Workload(rw="randread", size="12m", runtime=1)
    fio = FioProcess(w, data_dirs={"tiny": fs / ".benchsvc" / "a"}, work_dir=tmp_path / "w")
    lay_out(fio, w, fill=False)
    st = os.statvfs(fs)
    assert st.f_bavail * st.f_frsize < 12 * MIB  # not room for the files a second time
    check_space(w, fio.data_dirs)  # ...and no need: they are there, complete
    lay_out(fio, w, fill=False)


@pytest.mark.fio
def test_read_never_runs_on_a_file_with_holes(tmp_path: Path, tmpfs: TmpfsFactory) -> None:
    """The reported bug: a layout that ran out of space left a full-length sparse file;
    fio found the right size, skipped the layout and read the holes. Now the file is laid
    out again, completely, before any read."""
    fs = tmpfs(tmp_path / "tiny", size="32m")
    data = fs / ".benchsvc" / "a"
    data.mkdir(parents=True)
    leftover = data / "tiny.0.0"
    with leftover.open("wb") as out:
        out.write(b"\1" * MIB)
        out.truncate(24 * MIB)
    w = Workload(rw="randread", size="24m", runtime=1)
    fio = FioProcess(w, data_dirs={"tiny": data}, work_dir=tmp_path / "w")
    rc, _ = fio.prepare()
    assert rc == 0 and first_hole(leftover, 24 * MIB) == MIB  # fio alone keeps the holes
    lay_out(fio, w, fill=False)
    assert first_hole(leftover, 24 * MIB) is None
    assert os.stat(leftover).st_blocks * 512 >= 24 * MIB
    assert incomplete_files(w, fio.data_dirs) == []


@pytest.mark.fio
def test_layout_out_of_space_is_permanent_with_fios_words(
    tmp_path: Path, tmpfs: TmpfsFactory
) -> None:
    """Space taken between the check and the layout (another writer on a shared volume):
    fio's own ENOSPC, a permanent failure; the next attempt is refused before fio runs,
    counting what the partial file already holds."""
    fs = tmpfs(tmp_path / "tiny", size="16m")
    w = Workload(rw="randread", size="12m", runtime=1)
    fio = FioProcess(w, data_dirs={"tiny": fs / "a"}, work_dir=tmp_path / "w")
    check_space(w, fio.data_dirs)
    (fs / "other-writer").write_bytes(b"\1" * 8 * MIB)
    rc, said = fio.prepare()
    messages = fio_messages(said)
    assert rc != 0 and any("No space left on device" in m for m in messages), said
    assert permanent_failure(messages)
    held = os.stat(fs / "a" / "tiny.0.0").st_blocks * 512
    assert 0 < held < 12 * MIB
    with pytest.raises(ItemFailed) as e:
        lay_out(fio, w, fill=False)
    assert e.value.permanent
    assert str(e.value) == f"needs {(12 * MIB - held) // MIB} MiB, 0 MiB free on tiny"


@pytest.mark.fio
def test_an_ioengine_fio_cannot_load_is_permanent(tmp_path: Path) -> None:
    # Every engine the API accepts loads in this fio; one it lacks reads like this (a
    # minimal fio build without libaio says the same of "libaio").
    w = Workload.model_construct(**{**Workload().model_dump(), "ioengine": "nosuchengine"})
    fio = FioProcess(w, data_dirs={"scratch": tmp_path / "d"}, work_dir=tmp_path / "w")
    with pytest.raises(ItemFailed) as e:
        lay_out(fio, w, fill=False)
    assert e.value.permanent
    assert str(e.value).startswith("fio file layout exited 1: ")
    assert "fio: engine nosuchengine not loadable" in str(e.value)
