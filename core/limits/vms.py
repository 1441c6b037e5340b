"""Published limits of Azure VM sizes (pure data): vCPUs, the network bandwidth allocated
to the VM, and the uncached (remote) disk IOPS and throughput.

Network bandwidth is in Mbps (10^6 bit/s) and disk throughput in MBps (10^6 byte/s), as the
size tables give them. Azure meters the network on egress only: "The network bandwidth
allocated to each virtual machine is measured on egress (outbound) traffic ... Ingress isn't
measured or limited directly" (sources.VM_NETWORK). So the bandwidth bounds what a client
can *write* to network storage, not what it reads.

``nic_mbps`` is the line rate of the VM's network interface where it is known: an isolated
size (the ``i`` in E104id_v5) is the only VM on its host, so its allocation is the host's
100 Gbps interface, which then bounds reads too. For other sizes the interface's rate is not
published and reads have no network ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.limits.sources import DSV3, DSV5, EDV5, ESV5, Source


@dataclass(frozen=True)
class VmSize:
    name: str
    vcpus: int
    network_mbps: int  # egress allocation, all NICs together
    disk_iops: int  # uncached (remote) disk IOPS
    disk_mbps: int  # uncached (remote) disk throughput, MBps = 10^6 bytes/s
    source: Source
    nic_mbps: int | None = None

    @property
    def egress_bytes(self) -> float:
        return self.network_mbps * 1e6 / 8

    @property
    def nic_bytes(self) -> float | None:
        return None if self.nic_mbps is None else self.nic_mbps * 1e6 / 8


def _series(source: Source, rows: list[tuple[str, int, int, int, int]]) -> list[VmSize]:
    return [VmSize(f"Standard_{n}", v, net, iops, mbps, source) for n, v, net, iops, mbps in rows]


# (size, vCPUs, max network Mbps, uncached disk IOPS, uncached disk MBps), each table as the
# size series page gives it.
_SIZES = [
    *_series(
        DSV3,
        [
            ("D2s_v3", 2, 1000, 3200, 48),
            ("D4s_v3", 4, 2000, 6400, 96),
            ("D8s_v3", 8, 2000, 12800, 192),
            ("D16s_v3", 16, 2000, 25600, 384),
            ("D32s_v3", 32, 16000, 51200, 768),
            ("D48s_v3", 48, 24000, 76800, 1152),
            ("D64s_v3", 64, 30000, 80000, 1200),
        ],
    ),
    *_series(
        DSV5,
        [
            ("D2s_v5", 2, 12500, 3750, 85),
            ("D4s_v5", 4, 12500, 6400, 145),
            ("D8s_v5", 8, 12500, 12800, 290),
            ("D16s_v5", 16, 12500, 25600, 600),
            ("D32s_v5", 32, 16000, 51200, 865),
            ("D48s_v5", 48, 24000, 76800, 1315),
            ("D64s_v5", 64, 30000, 80000, 1735),
            ("D96s_v5", 96, 35000, 80000, 2600),
        ],
    ),
    *_series(
        ESV5,
        [
            ("E2s_v5", 2, 12500, 3750, 85),
            ("E4s_v5", 4, 12500, 6400, 145),
            ("E8s_v5", 8, 12500, 12800, 290),
            ("E16s_v5", 16, 12500, 25600, 600),
            ("E20s_v5", 20, 12500, 32000, 750),
            ("E32s_v5", 32, 16000, 51200, 865),
            ("E48s_v5", 48, 24000, 76800, 1315),
            ("E64s_v5", 64, 30000, 80000, 1735),
            ("E96s_v5", 96, 35000, 80000, 2600),
        ],
    ),
    *_series(
        EDV5,
        [
            ("E2d_v5", 2, 12500, 3750, 85),
            ("E4d_v5", 4, 12500, 6400, 145),
            ("E8d_v5", 8, 12500, 12800, 290),
            ("E16d_v5", 16, 12500, 25600, 600),
            ("E20d_v5", 20, 12500, 32000, 750),
            ("E32d_v5", 32, 16000, 51200, 865),
            ("E48d_v5", 48, 24000, 76800, 1315),
            ("E64d_v5", 64, 30000, 80000, 1735),
            ("E96d_v5", 96, 35000, 80000, 2600),
        ],
    ),
    # Isolated sizes: one VM per host, so the host's 100 Gbps interface is the VM's own.
    VmSize("Standard_E104is_v5", 104, 100000, 120000, 4000, ESV5, nic_mbps=100000),
    VmSize("Standard_E104id_v5", 104, 100000, 120000, 4000, EDV5, nic_mbps=100000),
]

VM_SIZES: dict[str, VmSize] = {v.name.lower(): v for v in _SIZES}


def vm_size(name: str | None) -> VmSize | None:
    """The size as IMDS names it (``Standard_E32s_v5``); the prefix and case are optional."""
    if not name:
        return None
    key = name.lower()
    return VM_SIZES.get(key) or VM_SIZES.get("standard_" + key)
