"""Where each published limit comes from: the public document, its title and the day it was
read. Every catalogue entry names one of these, so a figure shown beside a result can be
checked against its source."""

from __future__ import annotations

from dataclasses import dataclass

# Bumped whenever a limit, a formula or a source changes. Runs record the version they were
# judged with, so a later change does not rewrite what an older run was told.
CATALOGUE_VERSION = "2026.1"


@dataclass(frozen=True)
class Source:
    url: str
    title: str
    read_on: str  # ISO date the figures were taken from the document

    def as_doc(self) -> dict[str, str]:
        return {"url": self.url, "title": self.title, "read_on": self.read_on}


LEARN = "https://learn.microsoft.com/azure"
READ_ON = "2026-11-23"

ANF_SERVICE_LEVELS = Source(
    f"{LEARN}/azure-netapp-files/azure-netapp-files-service-levels",
    "Service levels for Azure NetApp Files",
    READ_ON,
)
ANF_LARGE_VOLUMES = Source(
    f"{LEARN}/azure-netapp-files/large-volumes-requirements-considerations",
    "Requirements and considerations for Azure NetApp Files large volumes",
    READ_ON,
)
AZURE_FILES_BILLING = Source(
    f"{LEARN}/storage/files/understanding-billing",
    "Understand Azure Files billing models (provisioned v1)",
    READ_ON,
)
DISK_TYPES = Source(
    f"{LEARN}/virtual-machines/disks-types",
    "Azure managed disk types (Premium SSD and Standard HDD size tables)",
    READ_ON,
)
VM_NETWORK = Source(
    f"{LEARN}/virtual-network/virtual-machine-network-throughput",
    "Virtual machine network bandwidth",
    READ_ON,
)


def vm_series(family: str, series: str, title: str) -> Source:
    return Source(f"{LEARN}/virtual-machines/sizes/{family}/{series}-series", title, READ_ON)


DSV3 = vm_series("general-purpose", "dsv3", "Dsv3 sizes series")
DSV5 = vm_series("general-purpose", "dsv5", "Dsv5 sizes series")
ESV5 = vm_series("memory-optimized", "esv5", "Esv5 sizes series")
EDV5 = vm_series("memory-optimized", "edv5", "Edv5 sizes series")
