"""DiskSpd engine (pure): DiskSpd command lines from the typed workload. Its XML output is
read by ``core.engines.diskspd_xml``.

Sources, in the microsoft/diskspd repository and wiki:

- options: the usage text in ``CmdLineParser/CmdLineParser.cpp`` (``_DisplayUsageInfo``);
- file creation: ``IORequestGenerator/IORequestGenerator.cpp`` (``_CreateFile``: ``-c``
  opens each file ``CREATE_ALWAYS``, sets its end and valid data length, or writes it whole
  where that is not allowed: on an SMB share, as ``SetFileValidData`` "cannot be a network
  file" (Win32 docs); ``_GenerateRequestsForTimeSpan`` does this inside the run);
- phases: wiki "Customizing tests" (``-W`` warm-up, ``-d`` measured, ``-C`` cool-down).

Two invocations per work item, as fio's ``create_only`` pass and measured run:

- ``layout_command_line``, before the start barrier: ``-c`` creates the files at full size;
- ``command_line(create=False)``, at the common start: opens the files as they are, so the
  synchronized window holds no file creation.

``-t`` threads share each target file, where fio's ``numjobs`` jobs each get their own file
of ``size``: with DiskSpd, ``size`` is the size of each created file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from core.models import Workload
from core.units import format_size

DISKSPD_EXE: Final = "diskspd.exe"
FILE_NAME: Final = "benchsvc{index}.dat"
LAYOUT_SECONDS: Final = 1

# Matched whole (fullmatch: '$' would let a trailing newline through).
# One path component: no spaces, quotes or shell/cmd metacharacters (;&|<>), nor ':' (an
# NTFS alternate data stream) or '$'. Components made of dots only are refused separately.
_PART = r"[A-Za-z0-9._-]+"
# "Z:\" or "C:\bench\run": a drive root or a directory on it. A bare "Z:" is refused: as a
# DiskSpd target, "<drive_letter>:" means the raw volume (usage text, "Valid targets").
_DRIVE_RE = re.compile(rf"[A-Za-z]:\\(?:{_PART}(?:\\{_PART})*\\?)?")
# "\\server\share[\dir...]", e.g. an Azure Files share: \\account.file.core.windows.net\share
_UNC_RE = re.compile(rf"\\\\{_PART}\\{_PART}(?:\\{_PART})*\\?")
# "/mnt/bench": an absolute POSIX directory.
_POSIX_RE = re.compile(rf"/(?:{_PART}(?:/{_PART})*/?)?")


def _separator(target: str) -> str:
    """The path separator of a valid target directory; ValueError for anything else."""
    if _DRIVE_RE.fullmatch(target) or _UNC_RE.fullmatch(target):
        sep = "\\"
    elif _POSIX_RE.fullmatch(target):
        sep = "/"
    else:
        raise ValueError(
            f"target {target!r} must be a drive directory (Z:\\ or C:\\bench), a UNC share "
            "(\\\\server\\share) or an absolute path, without spaces, quotes or ;&|<>"
        )
    if any(set(part) == {"."} for part in target.split(sep) if part):
        raise ValueError(f"target {target!r} must not contain '.' or '..' components")
    return sep


def target_files(targets: Sequence[str], files_per_target: int = 1) -> list[str]:
    """The files DiskSpd loads: ``files_per_target`` files ``benchsvc<i>.dat`` (i from 0)
    in each target directory, joined with the target's own separator."""
    if not targets:
        raise ValueError("give at least one target directory")
    if files_per_target < 1:
        raise ValueError("files_per_target must be at least 1")
    files: list[str] = []
    seen: set[str] = set()
    for target in targets:
        sep = _separator(target)
        base = target if target.endswith(sep) else target + sep
        # Windows paths are case-insensitive: Z:\ and z:\ are one directory.
        key = base.lower() if sep == "\\" else base
        if key in seen:
            raise ValueError(f"target {target!r} is given twice")
        seen.add(key)
        files += [base + FILE_NAME.format(index=i) for i in range(files_per_target)]
    return files


def _size_arg(n: int) -> str:
    """Bytes as DiskSpd reads them: a number with an optional K/M/G/T suffix, base 1024
    (usage text: ``-b<size>[KMGT]``, ``-c<size>[KMGTb]``)."""
    return format_size(n).upper()


def write_percent(workload: Workload) -> int:
    """DiskSpd's ``-w<percentage>`` of writes; fio's ``rwmixread`` is the read share."""
    if workload.rw in ("read", "randread"):
        return 0
    if workload.rw in ("write", "randwrite"):
        return 100
    return 100 - workload.rwmixread


def command_line(
    workload: Workload,
    *,
    targets: Sequence[str],
    files_per_target: int = 1,
    cooldown_s: int = 0,
    latency: bool = True,
    iops_interval_ms: int | None = 1000,
    xml: bool = True,
    create: bool = True,
) -> list[str]:
    """The DiskSpd argv (never a shell string) for ``workload`` on ``targets`` (directories).

    Options in the order of the Azure Files published example
    (``diskspd.exe -W300 -C5 -r -w100 -b4k -t8 -o8 -Sh -d60 -L -c2G ...``), then ours:

    - ``-W<ramp_time>``: always given, as DiskSpd's own default warm-up is 5 s, not 0;
    - ``-C<cooldown_s>``: run on, unmeasured, after the measured period, so that in a
      multi-client test every client still loads the target while each one measures (wiki,
      "Customizing tests");
    - ``-r`` for rand*, else ``-si`` with several threads: by default each thread keeps its
      own sequential offset from 0, so threads overlap and the target sees no sequential
      stream ("consider -si", Profile::Validate); ``-si`` interlocks them on one shared
      offset. With one thread ``-s`` (DiskSpd ignores ``-si`` there, with a warning);
    - ``-w<write %>``; ``-b<bs>``; ``-t<numjobs>`` threads per target file;
      ``-o<iodepth>`` outstanding I/Os per thread per target; ``-d<runtime>``;
    - ``-Sh`` when ``direct``: no software caching and write-through (``-Suw``), the
      closest to fio's O_DIRECT; without ``direct`` DiskSpd's default, cached I/O;
    - ``-L`` latency statistics; ``-D<ms>`` per-interval IOPS (the XML gets the time series);
      ``-Rxml`` XML output; ``-c<size>`` creates each file at the workload's size.

    With ``create=False`` there is no ``-c``: DiskSpd opens the files ``layout_command_line``
    made (and fails on a missing one) instead of recreating them inside the run. The default
    gives the standalone line, as published.

    ``workload.ioengine`` is a Linux fio setting with no DiskSpd counterpart (DiskSpd issues
    overlapped I/O completed through I/O completion ports by default) and is ignored.
    """
    if cooldown_s < 0:
        raise ValueError("cooldown_s must not be negative")
    if iops_interval_ms is not None and iops_interval_ms < 1:
        raise ValueError("iops_interval_ms must be at least 1")
    files = target_files(targets, files_per_target)
    w = workload
    if w.rw.startswith("rand"):
        pattern = "-r"
    else:
        pattern = "-si" if w.numjobs > 1 else "-s"
    argv = [
        DISKSPD_EXE,
        f"-W{w.ramp_time}",
        f"-C{cooldown_s}",
        pattern,
        f"-w{write_percent(w)}",
        f"-b{_size_arg(w.bs_bytes)}",
        f"-t{w.numjobs}",
        f"-o{w.iodepth}",
    ]
    if w.direct:
        argv.append("-Sh")
    argv.append(f"-d{w.runtime}")
    if latency:
        argv.append("-L")
    if iops_interval_ms is not None:
        argv.append(f"-D{iops_interval_ms}")
    if xml:
        argv.append("-Rxml")
    if create:
        argv.append(f"-c{_size_arg(w.size_bytes)}")
    return argv + files


def layout_command_line(
    workload: Workload, *, targets: Sequence[str], files_per_target: int = 1
) -> list[str]:
    """The DiskSpd argv that lays out the files ``command_line`` loads, before the barrier.

    DiskSpd has no create-only mode; its usage text's first example is the way: "Create
    8192KB file and run read test on it for 1 second: ``diskspd -c8192K -d1 testfile.dat``"
    (``-d0`` is not a run: ``_GenerateRequestsForTimeSpan`` asserts a positive duration).
    So: ``-c<size>`` over the same files, no warm-up or cool-down (``-W0 -C0``; the default
    warm-up is 5 s), one second of reads by one thread with one I/O in flight (``-w0 -t1
    -o1``), unbuffered (``-Sh``) so the read leaves nothing in the client's cache for a
    cached measured run, at the workload's block size (DiskSpd needs a file to hold one).
    """
    files = target_files(targets, files_per_target)
    return [
        DISKSPD_EXE,
        "-W0",
        "-C0",
        f"-d{LAYOUT_SECONDS}",
        "-w0",
        f"-b{_size_arg(workload.bs_bytes)}",
        "-t1",
        "-o1",
        "-Sh",
        f"-c{_size_arg(workload.size_bytes)}",
        *files,
    ]
