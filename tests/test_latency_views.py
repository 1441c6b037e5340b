"""Latency named and in its unit, the curves' shapes, the two-field sweep's plan, the
histogram's bars and the API document's groups (issue 26, pure: no stack)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.engines.fio_logs import plat_idx_to_val
from core.errors import ValidationFailed
from core.latency import format_ns, means_text, shown
from core.models import RunRequest, Workload
from core.runs.plan import plan_steps
from core.validation import parse
from reports.curve_figures import curve_groups
from reports.figures import _bucket_edges


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (460.0, "0.46 µs"),
        (2_490.0, "2.49 µs"),
        (659_456.0, "659.5 µs"),
        (999_999.0, "1 ms"),
        (3_129_344.0, "3.129 ms"),
        (272_400.0, "272.4 µs"),
        (1_500_000_000.0, "1.5 s"),
        (None, "-"),
    ],
)
def test_latency_reads_in_microseconds_below_a_millisecond(ns: float | None, text: str) -> None:
    assert format_ns(ns) == text


@given(st.floats(min_value=1.0, max_value=1e11))
def test_no_latency_reads_as_zero(ns: float) -> None:
    text = format_ns(ns)
    assert not text.startswith("0.000") and float(text.split()[0].replace(",", "")) > 0


def test_total_latency_is_shown_and_named() -> None:
    entry = {"lat_ns": {"p99": 2_000.0}, "clat_ns": {"p99": 500.0}}
    assert shown(entry) == ("lat", {"p99": 2_000.0})
    assert shown({"clat_ns": {"p99": 500.0}}) == ("clat", {"p99": 500.0})  # before it existed
    means = {"lat_mean_ns": 2_490.0, "slat_mean_ns": 2_020.0, "clat_mean_ns": 460.0}
    assert means_text(means) == "total 2.49 µs = submission 2.02 µs + completion 0.46 µs"


def test_each_bar_spans_its_fio_bucket() -> None:
    """Bucket i covers from the middle of the gap below plat_idx_to_val(i) to the middle of
    the gap above it: consecutive bars abut, none overlap."""
    values = [plat_idx_to_val(i) for i in range(29 * 64)]
    for below, above in itertools.pairwise(values):
        assert _bucket_edges(below)[1] == pytest.approx(_bucket_edges(above)[0], abs=0.5)
        lo, hi = _bucket_edges(below)
        assert lo < below < hi


def _point(step: int, clients: int, point: str, mode: str = "measure") -> dict[str, Any]:
    return {"step": step, "clients": clients, "point": point, "mode": mode, "iops": 1.0}


def test_curves_join_rate_points_client_counts_and_grid_rows() -> None:
    rate = [
        _point(0, 1, "max", "rate-max"),
        _point(1, 1, "rate=100%", "rate"),
        _point(2, 1, "rate=50%", "rate"),
    ]
    ((label, mine),) = curve_groups(rate)
    assert label == "" and [p["point"] for p in mine] == ["rate=50%", "rate=100%"]
    clients = [_point(0, 1, ""), _point(1, 2, ""), _point(2, 4, "")]
    ((_, mine),) = curve_groups(clients)
    assert [p["clients"] for p in mine] == [1, 2, 4]
    grid = [
        _point(0, 1, "iodepth=16,numjobs=1"),
        _point(1, 1, "iodepth=4,numjobs=1"),
        _point(2, 1, "iodepth=16,numjobs=2"),
        _point(3, 1, "iodepth=4,numjobs=2"),
    ]
    found = curve_groups(grid)
    assert [g for g, _ in found] == ["numjobs=1", "numjobs=2"]
    assert [p["point"] for p in found[0][1]] == ["iodepth=4,numjobs=1", "iodepth=16,numjobs=1"]


def test_a_two_field_sweep_plans_one_step_per_pair() -> None:
    sweep = {
        "grid": [{"field": "iodepth", "values": [1, 4]}, {"field": "bs", "values": ["4k", "64k"]}]
    }
    request = RunRequest.model_validate({"target": "scratch", "sweep": sweep})
    steps = plan_steps(request, Workload())
    assert [s.point for s in steps] == [
        "iodepth=1,bs=4k",
        "iodepth=4,bs=4k",
        "iodepth=1,bs=64k",
        "iodepth=4,bs=64k",
    ]
    assert [(s.workload.iodepth, s.workload.bs) for s in steps if s.workload][-1] == (4, "64k")
    bad = {"grid": [{"field": "iodepth", "values": [1, 9999]}, {"field": "numjobs", "values": [1]}]}
    with pytest.raises(ValidationFailed) as e:  # the model itself says it (issue 28)
        parse(RunRequest, {"target": "scratch", "sweep": bad})
    assert [(x.field, x.message) for x in e.value.errors] == [
        ("sweep.grid.0.values.1", "1 to 1024")
    ]
    with pytest.raises(ValueError, match="must differ"):
        RunRequest.model_validate(
            {"target": "t", "sweep": {"grid": [{"field": "bs", "values": ["4k"]}] * 2}}
        )


def test_api_document_groups_operations_and_keeps_the_agent_protocol_apart(
    openapi_document: dict[str, Any],
) -> None:
    doc = openapi_document
    names = [t["name"] for t in doc["tags"]]
    assert names[0] == "runs" and names[-1] == "agent protocol"
    for path, ops in doc["paths"].items():
        for op in ops.values():
            (tag,) = op["tags"]
            assert tag in names, path
            assert (tag == "agent protocol") == path.startswith("/api/agent/"), path
    assert doc["paths"]["/api/compare/report"]["get"]["tags"] == ["reports"]
