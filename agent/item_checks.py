"""Before an item runs: can this agent ever run it, and can it now? (An item it can never
run fails at once, for good; one whose mount is down now fails this attempt only.)"""

from __future__ import annotations

import shutil
from collections.abc import Mapping

from agent.mounts import MountWatch
from core.models import WorkItem


def refusal(
    item: WorkItem,
    agent: str,
    mounts: Mapping[str, object],
    fio_binary: str,
    diskspd_binary: str,
) -> str:
    """Why this agent can never run ``item`` as it stands: a mount it lacks, or an engine
    it cannot start."""
    missing = [t for t in item.targets if t not in mounts]
    if missing:
        have = ", ".join(sorted(mounts)) or "none"
        names = ", ".join(repr(t) for t in missing)
        return f"agent {agent} has no mount {names} (it has: {have})"
    if item.datasets and item.engine != "fio":
        return f"target {', '.join(item.datasets)} is read-only: DiskSpd would lay out files"
    if item.engine == "fio" and shutil.which(fio_binary) is None:
        return f"agent {agent} cannot run fio ({fio_binary} not found)"
    if item.engine == "diskspd" and shutil.which(diskspd_binary) is None:
        return f"agent {agent} cannot run DiskSpd ({diskspd_binary})"
    return ""


def mount_down(item: WorkItem, agent: str, watch: MountWatch) -> str:
    """Why a mount the item needs is not, right now, what this agent's configuration
    declares (not mounted, another filesystem or source): checked before every item."""
    problems = watch.check()
    unusable = [p for t in item.targets if (p := problems[t])]
    if unusable:
        return f"agent {agent} cannot use its mount: {'; '.join(unusable)}"
    return ""
