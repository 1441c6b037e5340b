"""What bound the run (pure): the published setups and figures, fed through the registry,
the catalogue and the attribution, get the published explanation; properties of the
attribution against a brute-force reading of its rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.analysis.ceilings import Ceiling
from core.analysis.step_aggregates import build_aggregates
from core.limits.facts import run_target_facts
from core.models import DirectionResult, HostFacts, LatencyStats, Result, WorkItem, Workload
from core.models.stored import Item, Run, Step
from core.runs.guardrails import parse_targets

RUN = "r-" + "c" * 32
MIB = 1 << 20
T0 = 1_800_000_000_000


def direction(bw_bytes: float, bs: int, p99_ns: float = 500_000) -> DirectionResult:
    iops = bw_bytes / bs
    stats = LatencyStats(min=1, max=p99_ns, mean=p99_ns / 2, stddev=0)
    return DirectionResult(
        io_bytes=int(bw_bytes * 60),
        total_ios=int(iops * 60),
        runtime_ms=60_000,
        iops=iops,
        bw_bytes=bw_bytes,
        lat_ns=stats,
        clat_ns=stats,
        clat_percentiles_ns={"99.000000": p99_ns},
        clat_bins_ns={str(int(p99_ns)): max(1, int(iops * 60))},
    )


def result(
    client: int,
    vm: str | None,
    *,
    read: float = 0.0,
    write: float = 0.0,
    bs: int = 256 << 10,
    step: int = 0,
    p99_ns: float = 500_000,
) -> Result:
    item = f"{RUN}.s{step}.c{client}"
    rw = "read" if not write else "write" if not read else "rw"
    return Result(
        id=item,
        run_id=RUN,
        item_id=item,
        step=step,
        client=client,
        agent_id=f"vm-{client}",
        engine="fio",
        engine_version="fio-3.33",
        targets=["vol1"],
        workload=Workload(rw=rw, bs=f"{bs // 1024}k", runtime=60),
        started_at_ms=T0,
        ended_at_ms=T0 + 60_000,
        read=direction(read, bs, p99_ns) if read else None,
        write=direction(write, bs, p99_ns) if write else None,
        host=HostFacts(hostname="h", kernel="k", os="o", cpu_count=32, vm_size=vm),
        mounts=[],
    )


def registry_entry(**declared: Any) -> str:
    return json.dumps([{"alias": "vol1", "pool": "default", **declared}])


def typed(run: dict[str, Any], docs: list[dict[str, Any]]) -> tuple[Run, list[Step], list[Item]]:
    """The stored forms of a run and of its step and item documents."""
    stored = Run.model_validate(
        {
            "created_at": "2031-01-01T00:00:00Z",
            "created_ms": 0,
            "request": {"target": run["target"], "pool": "default"},
            "comparison_key": "k",
            "pool": "default",
            "step_count": 1,
            "items_total": 1,
            "requested_by": {"name": "t", "role": "admin"},
            "body_hash": "h",
            **run,
        }
    )
    steps = [Step.model_validate({"run_id": RUN, **d}) for d in docs if d["kind"] == "step"]
    items = [
        Item.model_validate(
            {
                "run_id": RUN,
                **d,
                "work_item": WorkItem(
                    run_id=RUN,
                    item_id=d["id"],
                    step=d["step"],
                    client=d["client"],
                    clients=1,
                    pool="default",
                    targets=["vol1"],
                    engine="fio",
                    workload=Workload(),
                ),
            }
        )
        for d in docs
        if d["kind"] == "item"
    ]
    return stored, steps, items


def aggregate_of(registry: str, results: list[Result], **step: Any) -> dict[str, Any]:
    """One step through the real path: registry -> run facts -> build_aggregates; the
    aggregate as stored."""
    facts = run_target_facts("default", ["vol1"], parse_targets(registry))
    clients = len({r.client for r in results})
    run = {
        "id": RUN,
        "target": "vol1",
        "targets": ["vol1"],
        "workload": results[0].workload,
        "target_facts": facts,
    }
    docs = [{"id": f"{RUN}.s0", "kind": "step", "step": 0, "clients": clients, **step}] + [
        {"id": r.item_id, "kind": "item", "step": 0, "client": r.client, "state": "completed"}
        for r in results
    ]
    (agg,) = build_aggregates(*typed(run, docs), results, now_ms=T0)
    return agg.model_dump(mode="json")


ULTRA_LARGE_101 = registry_entry(
    facts={"kind": "anf", "service_level": "ultra", "quota_tib": 101, "large_volume": True}
)


def test_twelve_e32s_v5_reading_12761_mibps_are_bound_by_the_ultra_large_volume() -> None:
    # ANF large volume benchmarks: 12 x E32s_v5, 256 KiB sequential reads, 12,761 MiB/s.
    per_client = 12_761 * MIB / 12
    agg = aggregate_of(
        ULTRA_LARGE_101, [result(c, "Standard_E32s_v5", read=per_client) for c in range(12)]
    )
    b = agg["bound_by"]
    assert b["kind"] == "target"
    assert b["limit"] == 12_800 * MIB  # the large-volume ceiling, not 128 x 101 TiB
    assert b["utilisation"] == pytest.approx(12_761 / 12_800)
    # Reads are ingress: the clients' egress (12 x 16,000 Mbps) is shown, never the bound.
    egress = next(c for c in agg["ceilings"] if "egress" in c["name"])
    assert egress["applies"] is False and egress["limit"] == 12 * 16_000e6 / 8


def test_twelve_e32s_v5_writing_8518_mibps_reach_no_limit_and_name_the_nearest() -> None:
    per_client = 8_518 * MIB / 12
    agg = aggregate_of(
        ULTRA_LARGE_101, [result(c, "Standard_E32s_v5", write=per_client) for c in range(12)]
    )
    b = agg["bound_by"]
    assert b["kind"] == "none"  # 67 % of the volume, 37 % of the summed egress
    assert b["name"] == "target vol1 throughput"
    assert b["utilisation"] == pytest.approx(8_518 / 12_800)
    egress = next(c for c in agg["ceilings"] if c["kind"] == "client-network")
    assert egress["applies"] and egress["direction"] == "write"
    assert egress["utilisation"] == pytest.approx(8_518 * MIB / (12 * 2e9))


def test_one_e104id_v5_reading_10000_mibps_is_bound_by_its_nic() -> None:
    # Scale-up: one E104id_v5 with nconnect reads about 10,000 MiB/s, the NIC's line rate.
    agg = aggregate_of(ULTRA_LARGE_101, [result(0, "Standard_E104id_v5", read=10_000 * MIB)])
    nic = next(c for c in agg["ceilings"] if "NIC" in c["name"])
    # 100 Gbps carries 1,448 bytes of TCP payload in every 1,538 on the wire at MTU 1,500.
    assert nic["limit"] == pytest.approx(100_000e6 / 8 * 1448 / 1538)
    assert nic["limit"] / MIB == pytest.approx(11_224, abs=1)
    assert nic["applies"] and nic["reached_at"] == 0.85
    assert agg["bound_by"]["kind"] == "client-network"
    assert agg["bound_by"]["name"] == nic["name"]
    assert agg["bound_by"]["utilisation"] == pytest.approx(0.891, abs=0.001)
    volume = next(c for c in agg["ceilings"] if c["name"] == "target vol1 throughput")
    assert volume["utilisation"] == pytest.approx(10_000 / 12_800)  # 78 %: not the volume
    # Well under the line (8,000 MiB/s, 71 %) it is only the nearest.
    slow = aggregate_of(ULTRA_LARGE_101, [result(0, "Standard_E104id_v5", read=8_000 * MIB)])
    assert slow["bound_by"]["kind"] == "none"
    assert slow["bound_by"]["name"] == nic["name"]


def test_a_metered_limit_is_reached_at_90_percent_a_line_at_85() -> None:
    from core.analysis.ceilings import Ceiling, bound_by

    def cap(kind: str, used: float, reached_at: float = 0.90) -> Ceiling:
        return Ceiling(kind, kind, "bw_bytes", "read", 100.0, used, reached_at=reached_at)  # type: ignore[arg-type]

    assert bound_by([cap("target", 89.9)]).kind == "none"
    assert bound_by([cap("target", 90.0)]).kind == "target"
    assert bound_by([cap("client-network", 84.9, 0.85)]).kind == "none"
    assert bound_by([cap("client-network", 85.0, 0.85)]).kind == "client-network"
    # The nearest by utilisation among those reached: a line at 86 % over a volume at 91 %.
    both = bound_by([cap("target", 91.0), cap("client-network", 86.0, 0.85)])
    assert both.kind == "target"


def test_d32s_v3_reading_2_7_gibps_from_a_premium_share_exceeds_its_egress() -> None:
    # Azure Files premium: one D32s_v3 (16,000 Mbps egress) read more than 2.7 GiB/s.
    share = registry_entry(facts={"kind": "azure-files-premium", "provisioned_gib": 102_400})
    agg = aggregate_of(share, [result(0, "Standard_D32s_v3", read=2.7 * 1024 * MIB, bs=1 << 20)])
    egress = next(c for c in agg["ceilings"] if "egress" in c["name"])
    assert egress["utilisation"] > 1.4  # above the published egress ...
    assert egress["applies"] is False  # ... because ingress is not metered
    assert agg["bound_by"]["kind"] != "client-network"
    share_bw = next(c for c in agg["ceilings"] if c["name"] == "target vol1 throughput")
    assert share_bw["limit"] == 10_340 * MIB


def test_standard_hdd_at_480_iops_is_at_96_percent_of_its_500() -> None:
    disk = registry_entry(facts={"kind": "managed-disk", "sku": "S30"})
    agg = aggregate_of(disk, [result(0, None, read=480 * 4096, bs=4096)])
    b = agg["bound_by"]
    assert b["kind"] == "target" and b["name"] == "target vol1 IOPS"
    assert b["limit"] == 500 and b["utilisation"] == pytest.approx(0.96)


def test_vm_disk_limits_apply_to_managed_disks_only() -> None:
    disk = registry_entry(facts={"kind": "managed-disk", "sku": "P80"})
    agg = aggregate_of(disk, [result(0, "Standard_D2s_v5", read=84e6, bs=1 << 20)])
    assert agg["bound_by"]["kind"] == "vm-disk"  # 84 of the D2s_v5's 85 MB/s
    assert agg["bound_by"]["utilisation"] == pytest.approx(84 / 85)
    share = registry_entry(facts={"kind": "azure-files-premium", "provisioned_gib": 1024})
    agg = aggregate_of(share, [result(0, "Standard_D2s_v5", read=84e6, bs=1 << 20)])
    assert not [c for c in agg["ceilings"] if c["kind"] == "vm-disk"]


def test_declared_limits_and_facts_both_apply_the_tightest_wins() -> None:
    both = registry_entry(
        facts={"kind": "anf", "service_level": "premium", "quota_tib": 4},  # 256 MiB/s
        limits={"read_mibps": 100},
    )
    agg = aggregate_of(both, [result(0, None, read=99 * MIB)])
    assert agg["bound_by"]["name"] == "target vol1 read throughput"
    assert agg["bound_by"]["kind"] == "target"


def test_no_facts_no_sizes_no_counters_is_none_with_nothing_known() -> None:
    agg = aggregate_of("[]", [result(0, None, read=MIB)])
    assert agg["ceilings"] == []
    assert agg["bound_by"] == {
        "kind": "none",
        "name": "no limit known",
        "limit": None,
        "measured": None,
        "utilisation": None,
    }


def test_a_rate_curve_says_where_latency_rose_before_any_limit() -> None:
    results, docs = [], []
    # Steps: max, then 25/50/75 %: p99 doubles at 75 % while the volume is at 30 %.
    for step, (mode, mibps, p99) in enumerate(
        [("rate-max", 1000, 9e6), ("rate", 250, 1e6), ("rate", 500, 1.2e6), ("rate", 750, 3e6)]
    ):
        results.append(result(0, None, read=mibps * MIB, step=step, p99_ns=p99))
        docs.append(
            {"id": f"{RUN}.s{step}", "kind": "step", "step": step, "clients": 1, "mode": mode}
        )
        docs.append(
            {
                "id": results[-1].item_id,
                "kind": "item",
                "step": step,
                "client": 0,
                "state": "completed",
            }
        )
    run = {
        "id": RUN,
        "target": "vol1",
        "targets": ["vol1"],
        "workload": results[0].workload,
        "target_facts": run_target_facts("default", ["vol1"], parse_targets(ULTRA_LARGE_101)),
    }
    aggs = build_aggregates(*typed(run, docs), results, now_ms=T0)
    knees = [(a.step, a.knee) for a in aggs if a.knee is not None]
    assert [step for step, _ in knees] == [3]
    assert knees[0][1].ratio == pytest.approx(2.5) and knees[0][1].previous_step == 2


def test_the_run_records_the_facts_and_limits_it_was_judged_with() -> None:
    facts = run_target_facts("default", ["vol1", "other"], parse_targets(ULTRA_LARGE_101))
    assert facts is not None and facts.catalogue_version
    vol1, other = facts.model_dump(mode="json")["targets"]
    assert vol1["facts"]["service_level"] == "ultra" and vol1["limits"][0]["value"] == 12_800 * MIB
    assert vol1["limits"][0]["source"]["url"].endswith("large-volumes-requirements-considerations")
    assert other == {"alias": "other", "facts": None, "declared": None, "limits": []}
    assert run_target_facts("default", ["vol1"], parse_targets("[]")) is None
