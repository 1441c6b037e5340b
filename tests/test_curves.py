"""The curve views (pure): latency vs IOPS, scale-out with linear reference, repetitions."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from core.analysis.curves import latency_curve, repetition_spread, scaleout_curve
from core.models import StepAggregate


def agg(
    step: int,
    clients: int,
    iops: float,
    p99: float,
    *,
    point: str = "",
    mode: str = "measure",
    discarded: bool = False,
    like_key: str = "",
    lat_ns: Mapping[str, float] | None = None,
    lat_mean_ns: float = 1.0,
) -> StepAggregate:
    """A stored step aggregate of one reading client count: only what the curves read
    differs between steps."""
    pcts = {"p50": p99 / 2, "p90": p99, "p99": p99, "p99.9": p99, "p99.99": p99}
    read: dict[str, object] = {
        "iops": iops,
        "bw_bytes": iops * 4096,
        "clat_ns": pcts,
        "percentiles_basis": "whole-run",
        "total_ios": 1,
        "percentiles_exact": True,
        "lat_mean_ns": lat_mean_ns,
        "clat_mean_ns": 1.0,
        "slat_mean_ns": None,
    }
    if lat_ns is not None:
        read["lat_ns"] = lat_ns
    nothing = {"kind": "none", "name": "no limit known"}
    return StepAggregate.model_validate(
        {
            "id": f"r.s{step}",
            "run_id": "r",
            "step": step,
            "target": "t",
            "created_at": "2031-01-01T00:00:00.000Z",
            "mode": mode,
            "point": point,
            "repetition": 0,
            "discarded": discarded,
            "workload": {},
            "like_key": like_key,
            "comparison_key": "k",
            "clients": clients,
            "clients_expected": clients,
            "partial": False,
            "failed_clients": [],
            "basis": "whole-run",
            "window": None,
            "read": read,
            "per_client": [],
            "spread": None,
            "scaling_efficiency": None,
            "littles_law": None,
            "start_skew_ms": None,
            "ceilings": [],
            "bound_by": {**nothing, "limit": None, "measured": None, "utilisation": None},
        }
    )


def test_latency_curve_in_step_order_without_discarded_steps() -> None:
    aggs = [
        agg(2, 1, 300, 9, point="rate=30%"),
        agg(0, 1, 1000, 50, point="max"),
        agg(1, 1, 100, 5, point="rate=10%", discarded=True),
    ]
    curve = latency_curve(aggs)
    got = [(p["step"], p["iops"], p["read_clat_p99_ns"]) for p in curve]
    assert got == [(0, 1000, 50), (2, 300, 9)]
    # Without total latency a point has only completion latency, named as such.
    assert not any(k.startswith("read_lat_") for p in curve for k in p)


def test_latency_curve_names_each_kind_and_gives_the_maximum() -> None:
    lat = {"p50": 30, "p90": 60, "p99": 70, "p99.9": 90, "p99.99": 100, "max": 120}
    a = agg(0, 1, 1000, 50, point="max", mode="rate-max", lat_ns=lat, lat_mean_ns=35)
    (p,) = latency_curve([a])
    assert p["mode"] == "rate-max"
    assert (p["read_lat_p50_ns"], p["read_lat_p99_ns"], p["read_lat_p99.9_ns"]) == (30, 70, 90)
    assert (p["read_lat_max_ns"], p["read_lat_mean_ns"]) == (120, 35)
    assert (p["read_clat_p50_ns"], p["read_clat_p99_ns"]) == (25, 50)


def test_scaleout_curve_has_a_linear_reference() -> None:
    curve = scaleout_curve([agg(0, 1, 1000, 1), agg(1, 2, 1800, 1), agg(2, 4, 3000, 1)])
    assert [p["linear_iops"] for p in curve] == [1000, 2000, 4000]
    assert [p["efficiency"] for p in curve] == pytest.approx([1.0, 0.9, 0.75])


def test_repetition_spread_keeps_only_kept_repetitions() -> None:
    aggs = [
        agg(0, 1, 500, 1, point="p", discarded=True),
        agg(1, 1, 1000, 1, point="p"),
        agg(2, 1, 1100, 1, point="p"),
        agg(3, 1, 900, 1, point="p"),
    ]
    (spread,) = repetition_spread(aggs)
    assert spread["repetitions"] == 3 and spread["mean_iops"] == pytest.approx(1000)
    assert (spread["min_iops"], spread["max_iops"]) == (900, 1100)
    assert spread["cv"] == pytest.approx((20000 / 3) ** 0.5 / 1000)


def test_scaleout_curve_never_mixes_workloads() -> None:
    """An iodepth sweep over 1 and 2 clients: one curve per iodepth, each scaled from its
    own 1-client point (the old curve averaged iodepth 1 with iodepth 64 into one row)."""
    aggs = [
        agg(0, 1, 1000, 1, point="iodepth=1", like_key="d1"),
        agg(1, 1, 8000, 1, point="iodepth=64", like_key="d64"),
        agg(2, 2, 1900, 1, point="iodepth=1", like_key="d1"),
        agg(3, 2, 12000, 1, point="iodepth=64", like_key="d64"),
    ]
    curve = scaleout_curve(aggs)
    rows = {(p["point"], p["clients"]): p for p in curve}
    assert set(rows) == {("iodepth=1", 1), ("iodepth=1", 2), ("iodepth=64", 1), ("iodepth=64", 2)}
    assert rows[("iodepth=1", 2)]["linear_iops"] == 2000
    assert rows[("iodepth=64", 2)]["linear_iops"] == 16000
    assert rows[("iodepth=64", 2)]["efficiency"] == pytest.approx(0.75)
