"""Is each configured mount what the configuration says it is?

An NFS or SMB share that failed to mount leaves a plain directory at its path, and a
benchmark there measures the VM's own disk under the share's name. So a mount that
declares its filesystem type (and source) is used only while /proc/self/mountinfo shows
that path as a mount point of that type, from that source; otherwise the agent reports it
unavailable and runs no item on it. Checked at start, before every item and after fio ends
(an unmount during the run voids the measurement).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from agent.config import MountSpec
from agent.hostfacts import mount_facts
from core.models import MountFacts

log = logging.getLogger(__name__)
MOUNTINFO = Path("/proc/self/mountinfo")


def read_mountinfo() -> str | None:
    try:
        return MOUNTINFO.read_text()
    except OSError:
        return None  # not Linux: nothing to check a declared type against


def mount_problem(alias: str, spec: MountSpec, mountinfo: str | None) -> str | None:
    """Why ``alias`` cannot be used now, or None. Pure given ``mountinfo``'s text."""
    if not os.path.isdir(spec.path):
        return f"mount {alias}: {spec.path} is not a directory"
    if not spec.declared:
        return None
    if mountinfo is None:
        return f"mount {alias}: no /proc/self/mountinfo here to check fstype/source against"
    facts = mount_facts(alias, spec.path, mountinfo)
    want = " ".join(x for x in (spec.fstype, f"from {spec.source}" if spec.source else None) if x)
    if facts.mount_point != os.path.realpath(spec.path):
        return (
            f"mount {alias}: {spec.path} is not a mount point (it is a directory on "
            f"{facts.fstype} {facts.source} at {facts.mount_point}); declared {want}"
        )
    if spec.fstype is not None and facts.fstype != spec.fstype:
        return f"mount {alias}: {spec.path} is {facts.fstype} from {facts.source}, declared {want}"
    if spec.source is not None and _norm(facts.source) != _norm(spec.source):
        return f"mount {alias}: {spec.path} is mounted from {facts.source}, declared {want}"
    return None


def _norm(source: str) -> str:
    return source.rstrip("/") or source


def same_mount(before: MountFacts, after: MountFacts) -> bool:
    """The same filesystem still serves the path (options may be renegotiated)."""
    return (before.mount_point, before.fstype, before.source) == (
        after.mount_point,
        after.fstype,
        after.source,
    )


class MountWatch:
    """The agent's view of its mounts: which are usable now, logging each change."""

    def __init__(self, mounts: Mapping[str, MountSpec]) -> None:
        self.mounts = dict(mounts)
        self._last: dict[str, str | None] = {}

    def check(self) -> dict[str, str | None]:
        """Alias -> why it is unavailable (None when usable). Logs what changed."""
        info = read_mountinfo()
        now = {alias: mount_problem(alias, spec, info) for alias, spec in self.mounts.items()}
        for alias, problem in now.items():
            if alias in self._last and self._last[alias] == problem:
                continue
            if problem:
                log.error("%s; no item runs on it until it is", problem)
            elif alias in self._last:
                log.info("mount %s is usable again", alias)
        self._last = now
        return now

    def usable(self) -> list[str]:
        return [alias for alias, problem in self.check().items() if problem is None]

    def facts(self, alias: str) -> MountFacts:
        spec = self.mounts[alias]
        info = read_mountinfo()
        if info is None:
            return MountFacts(
                alias=alias,
                path=spec.path,
                mount_point="",
                fstype="unknown",
                options="",
                source="",
            )
        return mount_facts(alias, spec.path, info)


def mount_changes(
    targets: list[str],
    specs: Mapping[str, MountSpec],
    watch: MountWatch,
    before: Mapping[str, MountFacts],
) -> str:
    """Whether each mount is still the one measured (an unmount during the run leaves
    fio on a detached filesystem, or the path on another one): why not, or ''."""
    info = read_mountinfo()
    for t in targets:
        after = watch.facts(t)
        problem = mount_problem(t, specs[t], info)
        if problem or not same_mount(before[t], after):
            b = before[t]
            return (
                f"mount {t} changed during the run (it was {b.fstype} {b.source} at "
                f"{b.mount_point}, it is now {after.fstype} {after.source} at "
                f"{after.mount_point}): the measurement is discarded"
                + (f"; {problem}" if problem else "")
            )
    return ""
