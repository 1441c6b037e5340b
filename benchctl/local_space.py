"""On the local stack every agent lays its files out in the same directory: a working set
larger than that filesystem's free space is refused before the run is submitted."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from benchctl.local_state import running
from core.catalogue import get_profile
from core.models import FieldSweep, GridSweep, RunRequest, Workload
from core.runs.working_set import human_bytes, working_set


def _existing(directory: Path) -> int:
    """Bytes already allocated under the agents' file area (a rerun reuses its files)."""
    total = 0
    for root, _, files in os.walk(directory / ".benchsvc"):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total


def space_problem(body: dict[str, Any], targets: dict[str, str]) -> str | None:
    """Why ``body`` cannot fit on the local targets it names, or None. ``targets`` maps
    the local stack's aliases to their directories."""
    request = RunRequest.model_validate(body)
    aliases = request.all_targets
    if not all(a in targets for a in aliases):
        return None  # not a local directory this stack knows
    profile = get_profile(request.profile) if request.profile else None
    base = profile.workload.model_dump() if profile else {}
    workload = Workload.model_validate({**base, **body.get("workload", {})})
    swept = request.sweep.grid if isinstance(request.sweep, GridSweep) else [request.sweep]
    for sweep in swept:
        if isinstance(sweep, FieldSweep) and sweep.field == "numjobs":
            values = [int(v) for v in sweep.values]
            workload = workload.model_copy(update={"numjobs": max(values)})
    counts = request.clients if isinstance(request.clients, list) else [request.clients]
    clients = max(counts)
    per_target = profile.files_per_target if profile else 1
    per_client = working_set(request.engine, workload, len(aliases), per_target)
    for alias in dict.fromkeys(aliases):
        directory = Path(targets[alias])
        share = per_client // len(aliases) * aliases.count(alias)
        need = share * clients - _existing(directory)
        free = shutil.disk_usage(directory).free
        if need > free:
            return (
                f"workload.size: the working set is {human_bytes(per_client)} per client x "
                f"{clients} client{'s' if clients > 1 else ''} = {human_bytes(share * clients)} "
                f"on local target {alias} ({directory}), which has {human_bytes(free)} free"
            )
    return None


def local_space_problem(body: dict[str, Any], api_url: str) -> str | None:
    """``space_problem`` when ``api_url`` is the running local stack's API, else None."""
    stack = running()
    if stack is None or stack.api_url.rstrip("/") != api_url.rstrip("/"):
        return None
    return space_problem(body, stack.targets)
