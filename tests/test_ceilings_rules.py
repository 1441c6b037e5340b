"""The rules of what bound the run (pure): the attribution's properties against a brute-force
reading of its rule, the catalogue against its published figures, and the registry's errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.analysis.ceilings import REACHED, Ceiling, bound_by
from core.limits.targets import DISK_SKUS, azure_files_premium_limits
from core.limits.vms import VM_SIZES, vm_size
from core.runs.guardrails import parse_targets

MIB = 1 << 20

ceilings = st.lists(
    st.builds(
        Ceiling,
        kind=st.sampled_from(["target", "client-network", "client-cpu", "vm-disk"]),
        name=st.text(min_size=1, max_size=8),
        metric=st.just("bw_bytes"),
        direction=st.sampled_from(["read", "write", "total"]),
        limit=st.floats(1e-3, 1e12),
        measured=st.floats(0, 1e12),
        applies=st.booleans(),
    ),
    max_size=8,
)


@given(ceilings)
def test_bound_by_is_the_highest_applying_utilisation_reached_or_the_nearest(
    found: list[Ceiling],
) -> None:
    b = bound_by(found)
    applying = [c for c in found if c.applies]
    for c in found:
        assert c.as_doc().utilisation == c.measured / c.limit
    if not applying:
        assert b.kind == "none" and b.utilisation is None
        return
    # Brute force of the rule: reached caps first, then a reached CPU, else the nearest.
    util = {id(c): c.measured / c.limit for c in applying}
    caps = [c for c in applying if c.kind != "client-cpu" and util[id(c)] >= REACHED]
    cpus = [c for c in applying if c.kind == "client-cpu" and util[id(c)] >= REACHED]
    pool = caps or cpus or applying
    best = max(util[id(c)] for c in pool)
    assert b.utilisation == best
    assert (b.kind != "none") == (best >= REACHED)
    chosen = [c for c in pool if c.name == b.name and util[id(c)] == best]
    assert chosen and (b.kind == "none" or b.kind == chosen[0].kind)
    assert best >= REACHED or best == max(util.values())  # none names the nearest of all


def test_a_reached_cap_comes_before_a_busy_cpu() -> None:
    target = Ceiling("target", "t", "bw_bytes", "read", 100.0, 99.0)
    cpu = Ceiling("client-cpu", "cpu", "cpu_pct", "total", 100.0, 99.9)
    assert bound_by([target, cpu]).kind == "target"
    assert bound_by([Ceiling("target", "t", "bw_bytes", "read", 100.0, 50.0), cpu]).kind == (
        "client-cpu"
    )


@given(st.integers(100, 102_400))
def test_azure_files_premium_formula_matches_the_published_table(gib: int) -> None:
    iops, bw = azure_files_premium_limits(gib)
    assert iops.value == min(3000 + gib, 102_400)
    assert bw.value / MIB == 100 + -(-4 * gib // 100) + -(-6 * gib // 100)  # exact ceilings


def test_azure_files_premium_published_examples() -> None:
    # The provisioned v1 table's rows (GiB: baseline IOPS, MiB/s).
    for gib, iops, mibps in [(100, 3100, 110), (1024, 4024, 203), (10_240, 13_240, 1_125)]:
        i, b = azure_files_premium_limits(gib)
        assert (i.value, b.value / MIB) == (iops, mibps)
    assert azure_files_premium_limits(102_400)[1].value / MIB == 10_340


def test_catalogue_covers_the_published_sizes_and_each_entry_cites_a_source() -> None:
    for name in ("D32s_v3", "D32s_v5", "E32s_v5", "E104id_v5", "Standard_D4s_v5", "e16s_v5"):
        size = vm_size(name)
        assert size is not None, name
        assert size.source.url.startswith("https://learn.microsoft.com/")
    assert vm_size("Standard_E32s_v5").network_mbps == 16_000  # type: ignore[union-attr]
    assert vm_size("Standard_D32s_v3").disk_iops == 51_200  # type: ignore[union-attr]
    assert vm_size("Standard_NC6") is None and len(VM_SIZES) == 35
    assert DISK_SKUS["P30"].iops == 5000 and DISK_SKUS["P30"].mbps == 200


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        (
            {"facts": {"kind": "anf", "service_level": "fast", "quota_tib": 1}},
            "facts.service_level",
        ),
        ({"facts": {"kind": "anf", "service_level": "ultra", "quota_tib": 0}}, "facts.quota_tib"),
        ({"facts": {"kind": "managed-disk", "sku": "P31"}}, "facts.sku"),
        (
            {"facts": {"kind": "azure-files-premium", "provisioned_gib": 50}},
            "facts.provisioned_gib",
        ),
        ({"facts": {"kind": "nfs"}}, "facts"),
        ({"limits": {"read_mibps": -1}}, "limits.read_mibps"),
        ({"limits": {}}, "limits"),
        ({"limits": {"read_mbps": 1}}, "limits.read_mbps"),
    ],
)
def test_a_bad_registry_entry_is_an_error_naming_the_field(
    entry: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=rf"BENCH_TARGETS\[0\]\.{field}:"):
        parse_targets(json.dumps([{"alias": "vol1", "pool": "default", **entry}]))
