"""The agent's side of metadata phases: the tree each client works in, made before the
start barrier from the typed fields only, checked before a phase that needs it, and
removed by the delete phase, or as soon as the run will not reach it.

A tree lives under ``<mount>/.benchsvc/md-<pool>.<alias>/<run>/c<client>``: keyed by the
run and the client, not the agent, because each phase is its own step and the next phase's
item may be taken by another agent. Every client mounts the same share or volume, so that
agent finds the tree; on a volume only one VM mounts (a managed disk), it does not, and
the phase fails at once saying so. The ``<pool>.<alias>`` directory holds the trees of the
runs of one target lock (core.runs.admission: one run at a time per pool and target), so
an agent running an item there may remove every other run's tree in it: what a crashed
agent, or a run that failed on another client, left behind (agent.cleanup).
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path

from agent.failures import item_failure
from agent.fio_runner import safe_name
from agent.layout import ItemFailed, mib
from core.engines.fio_metadata import leaf_dirs, phase_of, tree_files
from core.models import WorkItem, Workload

TREES = ".benchsvc"


def trees_dir(mount: str | Path, pool: str, alias: str) -> Path:
    """Where the metadata trees of one pool's runs on one target live (pools and aliases
    hold no dot, so ``<pool>.<alias>`` names one pair)."""
    return Path(mount) / TREES / f"md-{pool}.{alias}"


def tree_roots(item: WorkItem, path_of: Callable[[str], str]) -> dict[str, Path]:
    return {
        t: trees_dir(path_of(t), item.pool, t) / safe_name(item.run_id) / f"c{item.client}"
        for t in item.targets
    }


def _existing_ancestor(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _missing_dirs(root: Path, leaves: list[str]) -> set[Path]:
    """The directories ``os.makedirs`` of each leaf would create."""
    missing: set[Path] = set()
    for leaf in leaves:
        p = Path(leaf)
        while not p.exists() and p not in missing and p != p.parent:
            missing.add(p)
            p = p.parent
    return missing


def check_tree_space(workload: Workload, roots: Mapping[str, Path]) -> None:
    """Refuse a create phase whose tree does not fit: per filesystem (mounts may share
    one), the inodes of its files and directories against what an unprivileged writer may
    still create (statvfs ``f_favail``), and the bytes of its files (``file_size``, rounded
    up to the filesystem's blocks) against ``f_bavail``. A filesystem that reports no
    inode count (``f_files`` 0) is not checked for inodes. Raises ItemFailed (permanent)."""
    md = workload.metadata
    assert md is not None
    files: dict[int, int] = defaultdict(int)
    dirs: dict[int, int] = defaultdict(int)
    aliases: dict[int, list[str]] = defaultdict(list)
    probe: dict[int, Path] = {}
    for alias, root in roots.items():
        base = _existing_ancestor(root)
        dev = os.stat(base).st_dev
        files[dev] += md.files_per_dir * workload.numjobs
        dirs[dev] += len(_missing_dirs(root, leaf_dirs(str(root), md, workload.numjobs)))
        aliases[dev].append(alias)
        probe.setdefault(dev, base)
    for dev, n in files.items():
        st = os.statvfs(probe[dev])
        where = ", ".join(aliases[dev])
        inodes = n + dirs[dev]
        if st.f_files and inodes > st.f_favail:
            raise ItemFailed(
                f"the tree needs {inodes:,} inodes ({n:,} files, {dirs[dev]:,} directories), "
                f"{st.f_favail:,} free on {where}",
                permanent=True,
            )
        block = st.f_frsize or 4096
        need = n * (-(-md.file_size // block) * block)
        free = st.f_bavail * st.f_frsize
        if need > free:
            raise ItemFailed(
                f"the tree needs {mib(need)} MiB ({n:,} files of {md.file_size:,} bytes), "
                f"{mib(free)} MiB free on {where}",
                permanent=True,
            )


def prepare(workload: Workload, roots: Mapping[str, Path]) -> None:
    """Before the barrier. create: a fresh tree of empty leaf directories (a retried
    create starts again from nothing, so every open creates a file), if it fits. stat,
    open, delete: every file of the tree must be there. Raises ItemFailed."""
    md = workload.metadata
    assert md is not None
    if phase_of(workload) == "create":
        remove(roots)
        check_tree_space(workload, roots)
        try:
            for root in roots.values():
                for d in leaf_dirs(str(root), md, workload.numjobs):
                    os.makedirs(d, exist_ok=True)
        except OSError as e:
            failure = item_failure(e, "making the metadata tree")
            raise ItemFailed(failure.message, permanent=failure.permanent) from e
        return
    for alias, root in roots.items():
        for f in tree_files(str(root), md, workload.numjobs):
            if not os.path.isfile(f):
                raise ItemFailed(
                    f"metadata tree of this client not found on {alias}: {f} is missing. "
                    "The create phase made it on the volume its agent mounts; metadata "
                    "phases need a volume every client mounts (an NFS or SMB share)",
                    permanent=True,
                )


def finish(workload: Workload, roots: Mapping[str, Path]) -> None:
    """After a valid phase. create with file_size: write each file's bytes (not measured).
    delete: nothing may be left of the files; the tree's directories are removed.
    Raises ItemFailed (with the OS's message when a write fails)."""
    md = workload.metadata
    assert md is not None
    op = phase_of(workload)
    if op == "create" and md.file_size:
        data = b"\0" * md.file_size
        for root in roots.values():
            for f in tree_files(str(root), md, workload.numjobs):
                try:
                    _write(f, data)
                except OSError as e:
                    failure = item_failure(e, f"writing the {md.file_size:,} bytes of {f}")
                    raise ItemFailed(failure.message, permanent=failure.permanent) from e
    if op == "delete":
        left = [
            f
            for root in roots.values()
            for f in tree_files(str(root), md, workload.numjobs)
            if os.path.lexists(f)
        ]
        remove(roots)
        if left:
            raise ItemFailed(f"the delete phase left {len(left):,} files, e.g. {left[0]}")


def _write(path: str, data: bytes) -> None:
    """Unbuffered, so a full filesystem answers this write (not a later close)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def remove(roots: Mapping[str, Path]) -> None:
    """Remove the trees, and the run's directory once no client's tree is left in it."""
    for root in roots.values():
        shutil.rmtree(root, ignore_errors=True)
        try:
            root.parent.rmdir()
        except OSError:
            pass  # another client's tree is still there (or it is gone already)
