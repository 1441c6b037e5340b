from __future__ import annotations

from agent.hostfacts import host_facts, mount_facts

# Real mountinfo lines are long; the NFS line is what an ANF mount with nconnect looks like.

MOUNTINFO = """\
22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
98 22 0:52 / /mnt/vdb1 rw,relatime shared:50 - nfs 10.0.0.4:/vol1 rw,vers=3,rsize=65536,wsize=65536,hard,nconnect=8
99 22 0:53 / /mnt/my\\040share rw - cifs //acct.file.core.windows.net/share rw,vers=3.1.1,multichannel
"""


def test_longest_mount_point_wins_with_nfs_options() -> None:
    m = mount_facts("vdb1", "/mnt/vdb1/bench", MOUNTINFO)
    assert (m.mount_point, m.fstype, m.source) == ("/mnt/vdb1", "nfs", "10.0.0.4:/vol1")
    assert "nconnect=8" in m.options and "rsize=65536" in m.options


def test_escaped_mount_point_and_root_fallback() -> None:
    assert mount_facts("s", "/mnt/my share/x", MOUNTINFO).fstype == "cifs"
    assert mount_facts("r", "/home/x", MOUNTINFO).mount_point == "/"


def test_host_facts_never_ask_imds_off_azure() -> None:
    facts = host_facts(use_imds=True)  # this machine is not an Azure VM: no metadata call
    assert facts.vm_size is None and facts.cpu_count > 0 and facts.kernel


def test_a_mount_on_top_of_another_wins() -> None:
    stacked = MOUNTINFO + "120 98 0:60 / /mnt/vdb1 rw - tmpfs over rw,size=1024k\n"
    m = mount_facts("vdb1", "/mnt/vdb1", stacked)
    assert (m.fstype, m.source) == ("tmpfs", "over")
