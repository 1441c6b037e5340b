"""Named, versioned workload profiles with the published defaults (docs/methodology.md).

A request names a profile and overrides any field; the run stores the fully resolved
workload, and only results with equal resolved workloads are compared. Bump a profile's
version whenever its defaults change, so old and new results never share a series.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from core.models import Engine, Workload
from core.models.answers import ProfileView

# Vdbench "threads" are outstanding I/Os per client: one thread = one I/O in flight.
# fio expresses the same as numjobs x iodepth; we map threads to numjobs at iodepth 1.
_ANF_VDBENCH = {"ramp_time": 60, "runtime": 600, "direct": True, "size": "10g", "iodepth": 1}
# The large-volume fio tests publish block sizes, the 1 TiB working set and the mount
# options, not job counts; 8 jobs x 16 deep per client is this service's default.
_ANF_FIO = {
    "ramp_time": 30,
    "runtime": 300,
    "direct": True,
    "size": "16g",
    "numjobs": 8,
    "iodepth": 16,
}
# Azure Files premium (DiskSpd): -W300 -d60 -t8 -o8 -c2G over 10 files, caching off (-Sh).
_AZFILES = {
    "ramp_time": 300,
    "runtime": 60,
    "direct": True,
    "size": "2g",
    "numjobs": 8,
    "iodepth": 8,
}
# Managed disks (DiskSpd): -c50G -d300 -F16 -w20 -r -o4, at 4, 8 and 64 KiB.
_DISK = {
    "rw": "randrw",
    "rwmixread": 80,
    "runtime": 300,
    "size": "50g",
    "numjobs": 16,
    "iodepth": 4,
    "direct": True,
}


# Metadata (fio's file engines; DiskSpd has no metadata mode). runtime caps create and
# delete (each file once) and is how long stat/open loop over the files.
# Azure Files premium SMB, metadata caching: "create, open, close and delete" of many small
# files and directories (web/app services, DevOps, indexing, virtual desktops with home
# directories). 8 threads x 1,000 files, 2 levels deep: 8,000 files per client, a few
# seconds per phase at a premium share's 2-5 ms creates; 4 KiB files.
_AZFILES_META = {
    "numjobs": 8,
    "runtime": 60,
    "metadata": {
        "ops": ["create", "open", "delete"],
        "files_per_dir": 1000,
        "dir_depth": 2,
        "file_size": 4096,
    },
}
# ANF large volume: file creation and unlink in deep trees (EDA, version control). 16
# threads x 2,000 files, 3 levels deep: 32,000 files per client, far under a directory's
# ~4 million files and a large volume's maxfiles; empty files (metadata only).
_ANF_META = {
    "numjobs": 16,
    "runtime": 300,
    "metadata": {
        "ops": ["create", "stat", "delete"],
        "files_per_dir": 2000,
        "dir_depth": 3,
        "file_size": 0,
    },
}
AZFILES_METADATA_SOURCE = (
    "Azure Files SMB metadata caching: "
    "https://learn.microsoft.com/azure/storage/files/smb-performance"
)
ANF_LARGE_VOLUME_SOURCE = (
    "ANF large volumes: "
    "https://learn.microsoft.com/azure/azure-netapp-files/large-volumes-requirements-considerations"
    " ; directory limits: "
    "https://learn.microsoft.com/azure/azure-netapp-files/azure-netapp-files-resource-limits"
)


@dataclass(frozen=True)
class Profile:
    name: str
    version: int
    title: str
    source: str  # which published method it reproduces
    workload: Workload
    engines: tuple[Engine, ...] = ("fio",)
    fill: bool = False  # write the whole working set before the measured phases
    files_per_target: int = 1  # DiskSpd spreads load over several files per mount
    cooldown_s: int = 0
    notes: str = ""

    def describe(self) -> ProfileView:
        return ProfileView(
            name=self.name,
            version=self.version,
            title=self.title,
            source=self.source,
            engines=list(self.engines),
            fill=self.fill,
            files_per_target=self.files_per_target,
            cooldown_s=self.cooldown_s,
            notes=self.notes,
            workload=self.workload,
        )


def _w(**fields: object) -> Workload:
    return Workload.model_validate(fields)


PROFILES: tuple[Profile, ...] = (
    Profile(
        "anf-vdbench-randread-8k",
        1,
        "ANF 8 KiB random read, 25 threads",
        "ANF Vdbench scale-out (2019)",
        _w(rw="randread", bs="8k", numjobs=25, **_ANF_VDBENCH),
        fill=True,
    ),
    Profile(
        "anf-vdbench-randwrite-8k",
        1,
        "ANF 8 KiB random write, 20 threads",
        "ANF Vdbench scale-out (2019)",
        _w(rw="randwrite", bs="8k", numjobs=20, **_ANF_VDBENCH),
        fill=True,
    ),
    Profile(
        "anf-vdbench-seqread-64k",
        1,
        "ANF 64 KiB sequential read, 20 threads",
        "ANF Vdbench scale-out (2019)",
        _w(rw="read", bs="64k", numjobs=20, **_ANF_VDBENCH),
        fill=True,
    ),
    Profile(
        "anf-vdbench-seqwrite-64k",
        1,
        "ANF 64 KiB sequential write, 26 threads",
        "ANF Vdbench scale-out (2019)",
        _w(rw="write", bs="64k", numjobs=26, **_ANF_VDBENCH),
        fill=True,
        notes="published with 26, 32 and 40 threads; sweep numjobs for the others",
    ),
    Profile(
        "anf-vdbench-seqmix-64k",
        1,
        "ANF 64 KiB sequential 50/50, 6 threads",
        "ANF Vdbench scale-out (2019)",
        _w(rw="rw", rwmixread=50, bs="64k", numjobs=6, **_ANF_VDBENCH),
        fill=True,
    ),
    Profile(
        "anf-vdbench-randmix-8k",
        1,
        "ANF 8 KiB random 50/50, 25 threads",
        "ANF Vdbench scale-out (2019)",
        _w(rw="randrw", rwmixread=50, bs="8k", numjobs=25, **_ANF_VDBENCH),
        fill=True,
    ),
    Profile(
        "anf-fio-seqread-256k",
        1,
        "ANF large volume 256 KiB sequential read",
        "ANF large volume (fio)",
        _w(rw="read", bs="256k", **_ANF_FIO),
        fill=True,
    ),
    Profile(
        "anf-fio-seqwrite-256k",
        1,
        "ANF large volume 256 KiB sequential write",
        "ANF large volume (fio)",
        _w(rw="write", bs="256k", **_ANF_FIO),
    ),
    Profile(
        "anf-fio-randread-8k",
        1,
        "ANF large volume 8 KiB random read",
        "ANF large volume (fio)",
        _w(rw="randread", bs="8k", **_ANF_FIO),
        fill=True,
    ),
    Profile(
        "anf-fio-randwrite-8k",
        1,
        "ANF large volume 8 KiB random write",
        "ANF large volume (fio)",
        _w(rw="randwrite", bs="8k", **_ANF_FIO),
    ),
    Profile(
        "azfiles-diskspd-randwrite-4k",
        1,
        "Azure Files premium 4 KiB random write, 8x8",
        "Azure Files SMB (DiskSpd)",
        _w(rw="randwrite", bs="4k", **_AZFILES),
        engines=("fio", "diskspd"),
        files_per_target=10,
        cooldown_s=5,
        notes="discard the first repetition: Azure Files guidance treats it as warm-up",
    ),
    Profile(
        "disk-diskspd-randmix-4k",
        1,
        "Managed disk 80/20 random mix, 4 KiB",
        "Managed disks (DiskSpd)",
        _w(bs="4k", **_DISK),
        engines=("fio", "diskspd"),
    ),
    Profile(
        "disk-diskspd-randmix-8k",
        1,
        "Managed disk 80/20 random mix, 8 KiB",
        "Managed disks (DiskSpd)",
        _w(bs="8k", **_DISK),
        engines=("fio", "diskspd"),
    ),
    Profile(
        "disk-diskspd-randmix-64k",
        1,
        "Managed disk 80/20 random mix, 64 KiB",
        "Managed disks (DiskSpd)",
        _w(bs="64k", **_DISK),
        engines=("fio", "diskspd"),
    ),
    Profile(
        "azfiles-smb-metadata-smallfiles",
        1,
        "Azure Files premium SMB metadata: create, open/close, delete of small files",
        AZFILES_METADATA_SOURCE,
        _w(**_AZFILES_META),
        notes="fio only (Linux SMB or NFS clients): DiskSpd has no metadata mode. Run it "
        "with the share's metadata_caching fact off, then on, and compare the two runs: "
        "the published change is about 30% lower latency and 60% more operations per second",
    ),
    Profile(
        "anf-large-volume-filetree",
        1,
        "ANF large volume file tree: create, stat, delete",
        ANF_LARGE_VOLUME_SOURCE,
        _w(**_ANF_META),
        notes="fio only: DiskSpd has no metadata mode. Large volumes are for metadata-heavy "
        "work such as EDA and version-control trees",
    ),
    Profile(
        "smoke-randread-4k",
        1,
        "Smoke check: 4 KiB random read, 1 job x QD16, 64 MiB, 10 s",
        "this service (not a published method): is the path up, roughly how fast",
        _w(rw="randread", bs="4k", numjobs=1, iodepth=16, size="64m", runtime=10, ramp_time=0),
        notes="Read-only and small, so chat users and deployment pipelines may run it "
        "anywhere; a number from it is not a published workload.",
    ),
)

BY_NAME: dict[str, Profile] = {p.name: p for p in PROFILES}


def get_profile(name: str) -> Profile:
    try:
        return BY_NAME[name]
    except KeyError:
        close = difflib.get_close_matches(name, BY_NAME, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise KeyError(f"no profile {name!r}{hint}; known: {', '.join(BY_NAME)}") from None


def resolve(profile: Profile | None, overrides: Workload | None) -> Workload:
    """The profile's workload with the fields the request set explicitly on top."""
    if overrides is None:
        return profile.workload if profile else Workload()
    if profile is None:
        return overrides
    changed = {k: getattr(overrides, k) for k in overrides.model_fields_set}
    return Workload.model_validate({**profile.workload.model_dump(), **changed})
