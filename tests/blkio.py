"""A block device of the tests' own and a cgroup v1 blkio throttle on it: real limits for
the agents' fio (it inherits the agent's cgroup), without the machine's shared disk as a
second limit."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import TmpfsFactory

BLKIO = Path("/sys/fs/cgroup/blkio")
MIB = 1 << 20


def device_of(path: Path) -> str:
    st = os.stat(path)
    return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


@contextlib.contextmanager
def ram_disk(tmp_path: Path, tmpfs: TmpfsFactory) -> Iterator[Path]:
    """A real block device of its own (a loop device over a file in RAM, ext4 on it), so
    the throttle is the only thing between fio and its reads: the machine's shared disk,
    busy with other work, would be a second limit."""
    backing = tmpfs(tmp_path / "ram", size="160m") / "disk.img"
    with backing.open("wb") as f:
        f.truncate(128 * MIB)
    loop = subprocess.run(
        ["losetup", "--find", "--show", str(backing)], check=True, capture_output=True, text=True
    ).stdout.strip()
    mounted = tmp_path / "disk"
    mounted.mkdir()
    try:
        subprocess.run(["mkfs.ext4", "-q", "-F", loop], check=True, capture_output=True)
        subprocess.run(["mount", loop, str(mounted)], check=True)
        yield mounted
    finally:
        subprocess.run(["umount", "-l", str(mounted)], check=False, capture_output=True)
        subprocess.run(["losetup", "-d", loop], check=False, capture_output=True)


class Throttle:
    """A blkio cgroup for processes that read the RAM disk; its limits can change while
    they run (the kernel applies a new limit to the next I/Os)."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.group = BLKIO / f"benchsvc-test-{os.getpid()}-{id(self)}"
        self.group.mkdir(exist_ok=True)

    def enter(self, pid: int) -> None:
        (self.group / "cgroup.procs").write_text(str(pid))

    def read_bps(self, limit: int) -> None:
        (self.group / "blkio.throttle.read_bps_device").write_text(f"{self.device} {limit}\n")

    def read_iops(self, limit: int) -> None:
        (self.group / "blkio.throttle.read_iops_device").write_text(f"{self.device} {limit}\n")

    def remove(self) -> None:
        for pid in (self.group / "cgroup.procs").read_text().split():
            (BLKIO / "cgroup.procs").write_text(pid)  # back to the root group
        self.group.rmdir()


@contextlib.contextmanager
def throttle(mounted: Path) -> Iterator[Throttle]:
    """A throttle group on the device ``mounted`` lives on; its processes go back to the
    root group at the end."""
    t = Throttle(device_of(mounted))
    try:
        yield t
    finally:
        t.remove()
