"""The workload catalogue as benchctl profiles prints it."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from core.models import Workload
from core.runs.working_set import human_bytes, working_set


def profile_working_set(p: dict[str, Any]) -> str:
    """What one client's files hold on one mount: fio's jobs each have a file, DiskSpd's
    threads share the profile's files (the engine that holds more is shown); a metadata
    profile's tree as files (and their bytes, when they have any)."""
    w = Workload.model_validate(p["workload"])
    if w.metadata is not None:
        files = w.numjobs * w.metadata.files_per_dir
        size = f", {human_bytes(files * w.metadata.file_size)}" if w.metadata.file_size else ""
        return f"{files:,} files{size}"
    sizes = {e: working_set(e, w, 1, p.get("files_per_target", 1)) for e in p["engines"]}
    return human_bytes(max(sizes.values()))


def profile_workload(p: dict[str, Any]) -> str:
    """What the profile does, in the words fio's options use."""
    w = p["workload"]
    md = w.get("metadata")
    if md:
        ops = "/".join(md["ops"])
        return f"metadata {ops}, {w['numjobs']} x {md['files_per_dir']:,} files"
    rw = w["rw"] + (
        f" {w['rwmixread']}/{100 - w['rwmixread']}" if w["rw"] in ("rw", "randrw") else ""
    )
    return f"{rw} {w['bs']}, {w['numjobs']} x {w['iodepth']}"


def profiles_table(profiles: list[dict[str, Any]]) -> Table:
    """The name is what one types: never cut, whatever the terminal's width."""
    t = Table(title="workload profiles")
    longest = max((len(p["name"]) for p in profiles), default=4)
    t.add_column("name", no_wrap=True, min_width=longest)
    t.add_column("v", justify="right")
    t.add_column("workload", overflow="fold")
    t.add_column("size")
    t.add_column("per client")
    t.add_column("s", justify="right")
    t.add_column("fill")
    t.add_column("engines")
    for p in profiles:
        w = p["workload"]
        t.add_row(
            p["name"],
            str(p["version"]),
            profile_workload(p),
            "-" if w.get("metadata") else w["size"],
            profile_working_set(p),
            f"{w['ramp_time']}+{w['runtime']}",
            "yes" if p["fill"] else "",
            ", ".join(p["engines"]),
        )
    t.caption = (
        "workload: rw, bs, jobs x depth (metadata: jobs x files per directory); size: each "
        "job's file; per client: what its files hold on each mount; s: warm-up + measured"
    )
    return t
