"""DiskSpd's command lines (core.engines.diskspd_command): the published Azure Files example,
the default workload, sequential mixes, the layout line that creates the files the measured
line opens, and the targets, layouts and knobs it refuses (its XML: tests/test_diskspd.py)."""

from __future__ import annotations

import pytest

from core.engines.diskspd_command import command_line, layout_command_line, target_files
from core.models import Workload

# learn.microsoft.com/azure/storage/files/smb-performance ("An example command that was used
# in this testing"), without its -Z1G write-buffer option, which we do not model.
AZURE_FILES_EXAMPLE = "-W300 -C5 -r -w100 -b4k -t8 -o8 -Sh -d60 -L -c2G"


def test_azure_files_published_example_over_ten_files() -> None:
    w = Workload(
        rw="randwrite", bs="4k", numjobs=8, iodepth=8, runtime=60, ramp_time=300, size="2g"
    )
    argv = command_line(
        w, targets=["Z:\\"], files_per_target=10, cooldown_s=5, iops_interval_ms=None, xml=False
    )
    assert argv == [
        "diskspd.exe",
        "-W300",
        "-C5",
        "-r",
        "-w100",
        "-b4K",
        "-t8",
        "-o8",
        "-Sh",
        "-d60",
        "-L",
        "-c2G",
        *[f"Z:\\benchsvc{i}.dat" for i in range(10)],
    ]
    # Same options in the same order; DiskSpd reads size suffixes case-insensitively.
    assert argv[1:12] == AZURE_FILES_EXAMPLE.replace("-b4k", "-b4K").split()


def test_default_workload_on_a_posix_directory() -> None:
    assert command_line(Workload(), targets=["/mnt/bench"]) == [
        "diskspd.exe",
        "-W0",
        "-C0",
        "-r",
        "-w0",
        "-b4K",
        "-t1",
        "-o1",
        "-Sh",
        "-d30",
        "-L",
        "-D1000",
        "-Rxml",
        "-c64M",
        "/mnt/bench/benchsvc0.dat",
    ]


def test_sequential_mix_on_unc_and_drive_directory_without_direct() -> None:
    w = Workload(
        rw="rw",
        rwmixread=70,
        bs="64k",
        numjobs=4,
        iodepth=2,
        size="1g",
        runtime=120,
        ramp_time=10,
        direct=False,
    )
    argv = command_line(
        w,
        targets=["\\\\acct.file.core.windows.net\\share", "C:\\bench\\"],
        files_per_target=2,
        latency=False,
        iops_interval_ms=500,
    )
    assert argv == [
        "diskspd.exe",
        "-W10",
        "-C0",
        "-si",  # several threads: one interlocked sequential stream per file
        "-w30",
        "-b64K",
        "-t4",
        "-o2",
        "-d120",
        "-D500",
        "-Rxml",
        "-c1G",
        "\\\\acct.file.core.windows.net\\share\\benchsvc0.dat",
        "\\\\acct.file.core.windows.net\\share\\benchsvc1.dat",
        "C:\\bench\\benchsvc0.dat",
        "C:\\bench\\benchsvc1.dat",
    ]


def test_layout_line_creates_the_files_the_measured_line_opens() -> None:
    """The published line split in two: DiskSpd's usage example (-c<size> -d1) lays the
    files out before the barrier; the measured line carries no -c, so DiskSpd opens the
    files as they are instead of recreating them (CREATE_ALWAYS) after the start."""
    w = Workload(
        rw="randwrite", bs="4k", numjobs=8, iodepth=8, runtime=60, ramp_time=300, size="2g"
    )
    files = [f"Z:\\benchsvc{i}.dat" for i in range(10)]
    layout = layout_command_line(w, targets=["Z:\\"], files_per_target=10)
    assert layout == [
        "diskspd.exe",
        *"-W0 -C0 -d1 -w0 -b4K -t1 -o1 -Sh -c2G".split(),
        *files,
    ]
    measured = command_line(w, targets=["Z:\\"], files_per_target=10, cooldown_s=5, create=False)
    standalone = command_line(w, targets=["Z:\\"], files_per_target=10, cooldown_s=5)
    assert measured == [a for a in standalone if a != "-c2G"]
    assert not [a for a in measured if a.startswith("-c")]
    assert measured[-10:] == files and "-C5" in measured


@pytest.mark.parametrize(
    ("rw", "numjobs", "bs", "pattern", "write", "block"),
    [
        ("read", 1, "1m", "-s", "-w0", "-b1M"),  # one thread: plain -s (-si would be ignored)
        ("write", 2, "512", "-si", "-w100", "-b512"),
        ("randread", 3, "8k", "-r", "-w0", "-b8K"),
        ("randrw", 1, "16k", "-r", "-w50", "-b16K"),
    ],
)
def test_pattern_write_share_and_block_size(
    rw: str, numjobs: int, bs: str, pattern: str, write: str, block: str
) -> None:
    w = Workload.model_validate({"rw": rw, "numjobs": numjobs, "bs": bs, "size": "4m"})
    argv = command_line(w, targets=["Z:\\"])
    assert argv[3:6] == [pattern, write, block]
    assert argv[6] == f"-t{numjobs}"


def test_ioengine_is_ignored() -> None:
    a = command_line(Workload(ioengine="libaio"), targets=["Z:\\"])
    assert a == command_line(Workload(ioengine="psync"), targets=["Z:\\"])


@pytest.mark.parametrize(
    "target",
    [
        "",
        "Z:",  # the raw volume, not a directory
        "Z:bench",
        "Z:/bench",
        "bench",
        "relative\\dir",
        "Z:\\my dir",
        'Z:\\"quoted"',
        "Z:\\it's",
        "Z:\\a;b",
        "Z:\\a&b",
        "Z:\\a|b",
        "Z:\\a<b",
        "Z:\\a>b",
        "C:\\bench\\file.dat:stream",
        "C:\\bench\\..\\windows",
        "\\\\server",  # a UNC path needs a share
        "\\\\server\\share\\..",
        "/mnt/../etc",
        "/mnt/a b",
        "/mnt/$(id)",
        "Z:\\bench\nC:\\",
        "Z:\\bench\n",
        "/mnt/bench\n",
    ],
)
def test_refuses_bad_targets(target: str) -> None:
    with pytest.raises(ValueError, match="target"):
        command_line(Workload(), targets=[target])


def test_refuses_bad_file_layouts_and_knobs() -> None:
    with pytest.raises(ValueError, match="at least one target"):
        command_line(Workload(), targets=[])
    with pytest.raises(ValueError, match="given twice"):
        target_files(["Z:\\", "z:\\"])
    assert len(target_files(["/mnt/a", "/mnt/A"])) == 2  # POSIX paths are case-sensitive
    with pytest.raises(ValueError, match="files_per_target"):
        target_files(["Z:\\"], files_per_target=0)
    with pytest.raises(ValueError, match="cooldown"):
        command_line(Workload(), targets=["Z:\\"], cooldown_s=-1)
    with pytest.raises(ValueError, match="iops_interval_ms"):
        command_line(Workload(), targets=["Z:\\"], iops_interval_ms=0)
