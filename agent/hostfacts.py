"""Facts about the client host and the mount under test, stored with every result so that
results are only compared with results taken on the same infrastructure."""

from __future__ import annotations

import json
import logging
import os
import platform
import socket
import urllib.request
from pathlib import Path

from core.models import HostFacts, MountFacts

log = logging.getLogger(__name__)
# Azure VMs carry this chassis asset tag (documented way to detect Azure from inside a VM).
AZURE_ASSET_TAG = "7783-7084-3265-9085-8269-3286-77"
IMDS_URL = "http://169.254.169.254/metadata/instance/compute?api-version=2021-02-01"


def on_azure() -> bool:
    try:
        return Path("/sys/class/dmi/id/chassis_asset_tag").read_text().strip() == AZURE_ASSET_TAG
    except OSError:
        return False


def _imds() -> dict[str, str]:
    req = urllib.request.Request(IMDS_URL, headers={"Metadata": "true"})
    with urllib.request.urlopen(req, timeout=2) as resp:  # noqa: S310 - fixed link-local URL
        data = json.load(resp)
    return {"vm_size": data.get("vmSize"), "region": data.get("location")}


def host_facts(*, use_imds: bool) -> HostFacts:
    extra: dict[str, str] = {}
    # Only ask the metadata endpoint on an Azure VM: elsewhere the address leads nowhere.
    if use_imds and on_azure():
        try:
            extra = _imds()
        except OSError as e:
            log.warning("instance metadata unavailable: %s", e)
    return HostFacts(
        hostname=socket.gethostname(),
        kernel=platform.release(),
        os=platform.platform(terse=True),
        cpu_count=os.cpu_count() or 0,
        vm_size=extra.get("vm_size"),
        region=extra.get("region"),
    )


def _unescape(field: str) -> str:
    # /proc/self/mountinfo escapes space, tab, newline and backslash as octal.
    for code, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, ch)
    return field


def mount_facts(alias: str, path: str, mountinfo: str | None = None) -> MountFacts:
    """The mount that holds ``path``: the longest mount point that is a prefix of it.

    Reads /proc/self/mountinfo (proc(5)): mount options are field 6, the super-block options
    (where NFS keeps nconnect, rsize, wsize) come after the ' - fstype source' separator.
    """
    text = mountinfo if mountinfo is not None else Path("/proc/self/mountinfo").read_text()
    real = os.path.realpath(path)
    best: MountFacts | None = None
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 6 or len(tail) < 3:
            continue
        point = _unescape(fields[4])
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        # Later lines are mounted on top: at equal length the last one is what the path sees.
        if inside and (best is None or len(point) >= len(best.mount_point)):
            options = fields[5] + "," + tail[2]
            best = MountFacts(
                alias=alias,
                path=path,
                mount_point=point,
                fstype=tail[0],
                options=options,
                source=_unescape(tail[1]),
            )
    if best is None:
        return MountFacts(
            alias=alias, path=path, mount_point="/", fstype="unknown", options="", source=""
        )
    return best
