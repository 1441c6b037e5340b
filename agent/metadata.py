"""The agent's side of metadata phases: the tree each client works in, made before the
start barrier from the typed fields only, checked before a phase that needs it, and
removed by the delete phase.

A tree lives under ``<mount>/.benchsvc/md-<run>/c<client>``: keyed by the run and the
client, not the agent, because each phase is its own step and the next phase's item may be
taken by another agent. Every client mounts the same share or volume, so that agent finds
the tree; on a volume only one VM mounts (a managed disk), it does not, and the phase
fails at once saying so.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from agent.fio_runner import safe_name
from agent.layout import ItemFailed
from core.engines.fio_metadata import leaf_dirs, phase_of, tree_files
from core.models import WorkItem, Workload


def tree_roots(item: WorkItem, path_of: Callable[[str], str]) -> dict[str, Path]:
    return {
        t: Path(path_of(t)) / ".benchsvc" / f"md-{safe_name(item.run_id)}" / f"c{item.client}"
        for t in item.targets
    }


def prepare(workload: Workload, roots: Mapping[str, Path]) -> None:
    """Before the barrier. create: a fresh tree of empty leaf directories (a retried
    create starts again from nothing, so every open creates a file). stat, open, delete:
    every file of the tree must be there. Raises ItemFailed."""
    md = workload.metadata
    assert md is not None
    if phase_of(workload) == "create":
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)
            for d in leaf_dirs(str(root), md, workload.numjobs):
                os.makedirs(d, exist_ok=True)
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
    delete: nothing may be left of the files; the tree's directories are removed."""
    md = workload.metadata
    assert md is not None
    op = phase_of(workload)
    if op == "create" and md.file_size:
        data = b"\0" * md.file_size
        for root in roots.values():
            for f in tree_files(str(root), md, workload.numjobs):
                with open(f, "r+b") as fh:
                    fh.write(data)
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


def remove(roots: Mapping[str, Path]) -> None:
    """Remove the trees, and the run's directory once no client's tree is left in it."""
    for root in roots.values():
        shutil.rmtree(root, ignore_errors=True)
        try:
            root.parent.rmdir()
        except OSError:
            pass  # another client's tree is still there
