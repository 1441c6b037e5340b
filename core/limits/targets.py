"""Published limits of storage targets (pure): Azure NetApp Files volumes, Azure Files
premium shares (provisioned v1) and managed disks, from the facts they follow from.

Each rule cites its source (core.limits.sources). Every throughput limit here is for reads
and writes together: ANF "Throughput is a combination of read and write speed"; Azure Files
gives "throughput (ingress + egress)"; a disk's throughput is one figure for both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from core.limits.sources import (
    ANF_LARGE_VOLUMES,
    ANF_SERVICE_LEVELS,
    AZURE_FILES_BILLING,
    DISK_TYPES,
    Source,
)

MIB = 1 << 20
ServiceLevel = Literal["standard", "premium", "ultra"]

# MiB/s per TiB of quota (sources.ANF_SERVICE_LEVELS, "Supported service levels").
ANF_MIBPS_PER_TIB: dict[str, int] = {"standard": 16, "premium": 64, "ultra": 128}
# Large volumes scale linearly per TiB up to this ceiling at every level
# (sources.ANF_LARGE_VOLUMES, table "Linear performance scaling per TiB up to maximum
# throughput"). At the 100 TiB the earlier edition capped them at, that is 1,600 / 6,400 /
# 12,800 MiB/s for Standard / Premium / Ultra.
ANF_LARGE_VOLUME_MAX_MIBPS = 12_800

# Azure Files provisioned v1 (premium), sources.AZURE_FILES_BILLING, "Provisioned v1
# provisioning detail": baseline IOPS = MIN(3000 + 1 * GiB, 102400); throughput (MiB/s) =
# 100 + CEILING(0.04 * GiB) + CEILING(0.06 * GiB); 100 GiB to 100 TiB. Provisioned v2
# (IOPS and throughput bought separately) is declared with "limits" instead.
AZFILES_MIN_GIB, AZFILES_MAX_GIB = 100, 102_400
AZFILES_MAX_IOPS = 102_400


@dataclass(frozen=True)
class DiskSku:
    name: str
    iops: int
    mbps: int  # MB/s, 10^6 bytes


# sources.DISK_TYPES: base provisioned IOPS and throughput per disk (no bursting).
DISK_SKUS: dict[str, DiskSku] = {
    d.name: d
    for d in [
        *(
            DiskSku(n, i, t)
            for n, i, t in [
                ("P1", 120, 25),
                ("P2", 120, 25),
                ("P3", 120, 25),
                ("P4", 120, 25),
                ("P6", 240, 50),
                ("P10", 500, 100),
                ("P15", 1100, 125),
                ("P20", 2300, 150),
                ("P30", 5000, 200),
                ("P40", 7500, 250),
                ("P50", 7500, 250),
                ("P60", 16000, 500),
                ("P70", 18000, 750),
                ("P80", 20000, 900),
            ]
        ),
        # Standard HDD: "Up to 500" IOPS and 60 MB/s for S4 to S50.
        *(DiskSku(n, 500, 60) for n in ("S4", "S6", "S10", "S15", "S20", "S30", "S40", "S50")),
        DiskSku("S60", 1300, 300),
        DiskSku("S70", 2000, 500),
        DiskSku("S80", 2000, 500),
    ]
}


@dataclass(frozen=True)
class Limit:
    """One published (or declared) limit of a target, in bytes/s or IOPS."""

    metric: Literal["bw_bytes", "iops"]
    direction: Literal["read", "write", "total"]
    value: float
    rule: str  # how it follows from the facts, for people
    source: Source | None = None  # None: declared by whoever registered the target

    def as_doc(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "direction": self.direction,
            "value": self.value,
            "rule": self.rule,
            "source": self.source.as_doc() if self.source else None,
        }


def anf_limits(level: ServiceLevel, quota_tib: float, large_volume: bool) -> list[Limit]:
    per_tib = ANF_MIBPS_PER_TIB[level]
    mibps = per_tib * quota_tib
    rule = f"{level} {per_tib} MiB/s per TiB x {quota_tib:g} TiB"
    source = ANF_SERVICE_LEVELS
    if large_volume and mibps > ANF_LARGE_VOLUME_MAX_MIBPS:
        mibps = ANF_LARGE_VOLUME_MAX_MIBPS
        rule += f", capped at {ANF_LARGE_VOLUME_MAX_MIBPS:,} MiB/s for a large volume"
        source = ANF_LARGE_VOLUMES
    return [Limit("bw_bytes", "total", mibps * MIB, rule, source)]


def azure_files_premium_limits(provisioned_gib: int) -> list[Limit]:
    g = provisioned_gib
    iops = min(3000 + g, AZFILES_MAX_IOPS)
    mibps = 100 + math.ceil(0.04 * g) + math.ceil(0.06 * g)
    return [
        Limit(
            "iops",
            "total",
            iops,
            f"baseline IOPS MIN(3000 + {g} GiB, {AZFILES_MAX_IOPS:,})",
            AZURE_FILES_BILLING,
        ),
        Limit(
            "bw_bytes",
            "total",
            mibps * MIB,
            f"100 + CEILING(0.04 x {g}) + CEILING(0.06 x {g}) MiB/s",
            AZURE_FILES_BILLING,
        ),
    ]


def managed_disk_limits(sku: str) -> list[Limit]:
    d = DISK_SKUS[sku]
    return [
        Limit("iops", "total", d.iops, f"{sku}: {d.iops:,} IOPS per disk", DISK_TYPES),
        Limit("bw_bytes", "total", d.mbps * 1e6, f"{sku}: {d.mbps} MB/s per disk", DISK_TYPES),
    ]
