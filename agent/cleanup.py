"""What benchmark files the agent removes from a target, and when.

On each read-write mount the agent writes under ``<mount>/.benchsvc/`` only:

- ``<agent-id>/``: the data files of its fio jobs (one per job, the job's size). They are
  the working set a fill preconditions, kept for the next run on purpose (a valid fill
  marker skips the fill); files a failed layout left short or with holes are removed when
  the item fails for good.
- ``md-<pool>.<alias>/<run>/c<client>/``: a metadata run's tree (agent.metadata). The
  delete phase removes it; a phase that fails for good, is cancelled or aborted at its
  barrier removes its client's tree at once (no later phase will run); and before any
  item runs on a target, the trees of every other run of that pool and target are
  removed: the target lock lets one run at a time use them, so they are what a crashed
  agent or another client of a failed run left.

``benchctl clean TARGET`` has an agent remove every file under ``.benchsvc/`` last changed
before the order was given (core.runs.clean). None of this ever raises: a file that cannot
be removed is logged, and the item (or the order) goes on.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from agent import metadata
from agent.config import AgentConfig
from agent.fio_runner import safe_name
from agent.layout import remove_incomplete
from agent.mounts import MountWatch
from agent.outcome import Outcome
from core.engines.fio_metadata import phase_of
from core.models import WorkItem
from core.runs.clean import CleanOrder

log = logging.getLogger(__name__)
MAX_CLEAN_DELIVERIES = 5  # a clean order no agent of the pool can carry out is dropped


def writable_targets(item: WorkItem, mounts: Mapping[str, object]) -> list[str]:
    """The item's targets this agent has and may write on (not its read-only data sets)."""
    return [t for t in item.targets if t in mounts and t not in item.datasets]


def data_dirs(item: WorkItem, agent: str, path_of: Callable[[str], str]) -> dict[str, Path]:
    return {
        t: Path(path_of(t)) / metadata.TREES / safe_name(agent)
        for t in item.targets
        if t not in item.datasets
    }


def remove_stale_trees(
    item: WorkItem, mounts: Mapping[str, object], path_of: Callable[[str], str]
) -> list[Path]:
    """Before an item runs: every other run's metadata tree under this pool's and
    target's directory (the target lock makes this run the only one using it)."""
    removed = []
    for t in writable_targets(item, mounts):
        trees = metadata.trees_dir(path_of(t), item.pool, t)
        try:
            entries = list(trees.iterdir())
        except OSError:
            continue  # none yet (or the mount is unusable: the item's checks say so)
        for entry in entries:
            if entry.name == safe_name(item.run_id):
                continue
            shutil.rmtree(entry, ignore_errors=True)
            if entry.exists():
                log.warning("could not remove %s, left by an earlier run", entry)
            else:
                removed.append(entry)
                log.info("removed %s, left by an earlier run", entry)
    return removed


def after_item(
    item: WorkItem,
    agent: str,
    mounts: Mapping[str, object],
    path_of: Callable[[str], str],
    *,
    ended: bool,
) -> None:
    """After an attempt that did not complete: ``ended`` when the item will not run again
    (a final failure, a cancel, an aborted step). A metadata phase that ended removes its
    client's tree (a failed phase ends the run's later phases); a failed create removes it
    in any case (its retry starts from nothing). A data item that ended removes the files
    its layout left incomplete."""
    mine = [t for t in writable_targets(item, mounts)]
    if not mine:
        return
    narrowed = item.model_copy(update={"targets": mine})
    try:
        if item.workload.metadata is not None:
            if ended or phase_of(item.workload) == "create":
                metadata.remove(metadata.tree_roots(narrowed, path_of))
        elif ended and item.engine == "fio":
            for f in remove_incomplete(item.workload, data_dirs(narrowed, agent, path_of)):
                log.info("removed %s: its layout did not complete", f)
    except Exception as e:  # removing files never ends an item or the agent
        log.warning("item %s: could not remove what it wrote: %s", item.item_id, e)


def parse_order(content: str) -> CleanOrder | None:
    """A clean order (core.runs.clean), or None when the message is something else."""
    try:
        doc = json.loads(content)
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("kind") != "clean":
        return None
    try:
        return CleanOrder.model_validate(doc)
    except ValidationError:
        return None


@dataclass(frozen=True)
class Cleaned:
    files: int
    bytes: int  # what the filesystem held for them (st_blocks)
    kept: int  # changed since the order: a run admitted after it wrote them
    failed: int


def clean_target(mount: Path, before_ms: int) -> Cleaned:
    """Remove every file under ``<mount>/.benchsvc/`` last changed before ``before_ms``
    (Unix ms), then the directories left empty."""
    root = mount / metadata.TREES
    files = size = kept = failed = 0
    for top, dirs, names in os.walk(root, topdown=False):
        for name in names:
            path = os.path.join(top, name)
            try:
                st = os.lstat(path)
                if st.st_mtime_ns // 1_000_000 >= before_ms:
                    kept += 1
                    continue
                os.unlink(path)
            except FileNotFoundError:
                continue
            except OSError as e:
                failed += 1
                log.warning("clean: could not remove %s: %s", path, e)
                continue
            files += 1
            size += st.st_blocks * 512
        for name in dirs:
            try:
                os.rmdir(os.path.join(top, name))
            except OSError:
                pass  # not empty: it holds what was kept
    try:
        root.rmdir()
    except OSError:
        pass
    return Cleaned(files, size, kept, failed)


def carry_out(
    order: CleanOrder, deliveries: int, config: AgentConfig, watch: MountWatch
) -> Outcome:
    """``benchctl clean``: this agent removes the target's benchmark files when it has the
    target and it is usable (CLEANED); otherwise another agent of the pool may (RELEASED),
    and after MAX_CLEAN_DELIVERIES the order is dropped (DROPPED). The worker then deletes
    the message or hands it back."""
    if order.target not in config.mounts or watch.check()[order.target]:
        if deliveries >= MAX_CLEAN_DELIVERIES:
            log.error("clean %s: no agent could reach %s; dropped", order.id, order.target)
            return Outcome.DROPPED
        return Outcome.RELEASED
    mount = Path(config.path(order.target))
    done = clean_target(mount, order.requested_at_ms)
    log.info(
        f"clean {order.id} of {order.target} (asked by {order.requested_by}): removed "
        f"{done.files:,} files ({done.bytes / (1 << 20):,.1f} MiB) under "
        f"{mount / '.benchsvc'}; kept {done.kept:,} changed since the order; "
        f"{done.failed:,} could not be removed"
    )
    return Outcome.CLEANED
