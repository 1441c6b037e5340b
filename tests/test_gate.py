"""The regression gate (core.analysis.gate) and the monitor applying it: every run of a
slowdown fails, bandwidth never disagrees with IOPS, the rule's figures are right, and
triage moves the reference as documented."""

from __future__ import annotations

import re
import statistics
from types import SimpleNamespace
from typing import Any, TypeVar, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.analysis.compare import compare_aggregates
from core.analysis.gate import MAD_TO_SD, judge_value, run_verdict
from core.latency import format_ns
from core.models import StepAggregate
from core.models.document import StoredDoc
from core.models.gate import GateRule
from core.models.regression import Regression
from core.models.series import PointFacts, StepPoint
from core.models.stored import Run
from core.monitoring.monitor import Monitor
from core.ports import Store
from reports.data import SeriesReport
from reports.page import series_page
from tests.documents import stored_aggregate, stored_result

BS = 4096
M = TypeVar("M", bound=StoredDoc)


def _read(doc: M) -> M:
    """A stored document as a read returns it: validated afresh from its JSON, as
    adapters.cosmos does (and some 5 times faster than a deep copy of the model: the gate
    and bot tests read every point of a series for each point they record)."""
    return type(doc).model_validate(doc.doc())


class Series:
    """The monitor's series repository, in memory (the same calls as adapters.cosmos)."""

    def __init__(self) -> None:
        self.pts: dict[str, StepPoint] = {}
        self.regs: dict[str, Regression] = {}

    def create_point(self, point: StepPoint) -> bool:
        return self.pts.setdefault(point.id, _read(point)) is not None

    def points(self, key: str) -> list[StepPoint]:
        return [_read(p) for p in self.pts.values() if p.series_key == key]

    def all_points(self) -> list[PointFacts]:
        return [PointFacts.model_validate(p.doc()) for p in self.pts.values()]

    def create_regression(self, regression: Regression) -> bool:
        if regression.id in self.regs:
            return False
        self.regs[regression.id] = _read(regression)
        return True

    def regressions(self, key: str | None = None) -> list[Regression]:
        return [_read(r) for r in self.regs.values() if key in (None, r.series_key)]

    def get_regression(self, key: str, reg_id: str) -> Regression:
        return _read(self.regs[reg_id])

    def replace_regression(self, regression: Regression) -> Regression:
        self.regs[regression.id] = _read(regression)
        return regression


class Runs:
    def get(self, run_id: str) -> Any:
        return SimpleNamespace(owner="ci")


def monitor(pct: float = 10.0) -> tuple[Monitor, Series]:
    series = Series()
    store = cast(Store, SimpleNamespace(series=series, runs=Runs()))
    return Monitor(store, gate_pct=pct), series


def aggregate(iops: float, p99_ns: float, bw_bytes: float | None = None) -> StepAggregate:
    """``p99_ns`` is total latency's p99 (what the gate watches); completion latency sits a
    submission below it, as fio reports them."""
    return stored_aggregate(
        workload={"rw": "randread", "bs": "4k", "runtime": 10},
        read={
            "iops": iops,
            "bw_bytes": iops * BS if bw_bytes is None else bw_bytes,
            "lat_ns": {"p50": p99_ns / 3, "p99": p99_ns, "p99.9": p99_ns * 1.5},
            "clat_ns": {"p50": p99_ns / 3 - 2e3, "p99": p99_ns - 2e3, "p99.9": p99_ns * 1.5},
        },
    )


def record(mon: Monitor, i: int, iops: float, p99_ns: float, infra: str = "ext4") -> Any:
    run = SimpleNamespace(
        id=f"r-{i:032x}", engine="fio", targets=["vol1"], target="vol1", target_facts=None, tags={}
    )
    result = stored_result(
        started_at_ms=1_000_000 + i * 60_000,
        host={"vm_size": "E32s_v5", "region": "westeurope"},
        mounts=[{"alias": "vol1", "fstype": infra, "source": "/dev/x", "options": "rw"}],
    )
    return mon.record(cast(Run, run), [aggregate(iops, p99_ns)], [result]).gate


# The sequence: six runs of one workload at about 61K IOPS (one 11.4 % low), then
# five at a quarter of that.
GOOD = [61_200, 60_800, 61_500, 54_200, 61_000, 60_900]
SLOW = [15_300, 15_100, 15_400, 20_500, 15_200]


def test_every_run_of_a_slowdown_fails_and_bandwidth_agrees_with_iops() -> None:
    mon, series = monitor()
    verdicts = []
    for i, iops in enumerate(GOOD + SLOW):
        gate = record(mon, i, iops, 2e6 * 61_000 / iops)
        by_metric = {m.metric: m for m in gate.metrics}
        assert by_metric["read.bw_bytes"].verdict == by_metric["read.iops"].verdict
        verdicts.append(gate.verdict)
        if i >= len(GOOD):
            iops_v = by_metric["read.iops"]
            assert iops_v.verdict == "regression", iops_v
            assert iops_v.reference.points == len(GOOD)  # the slowed runs are not the norm
            assert iops_v.reference.median == statistics.median(GOOD)
            assert iops_v.regression_id is not None
            assert by_metric["read.lat.p99"].verdict == "regression"
    assert verdicts == ["not-enough-history"] * 5 + ["pass"] + ["regression"] * 5
    # One event: the first slowed run's regression, which every later one counts in.
    regs = series.regressions()
    assert {r.first_run_id for r in regs} == {f"r-{6:032x}"}
    # Bandwidth's records are IOPS' records: the same method, change and first run.
    by_metric = {
        m: sorted(
            (r.method, r.first_run_id, round(r.change_pct or 0.0, 6)) for r in regs if r.metric == m
        )
        for m in ("read.iops", "read.bw_bytes")
    }
    assert by_metric["read.iops"] == by_metric["read.bw_bytes"] != []


def test_the_band_is_the_larger_of_the_floor_and_three_robust_sd() -> None:
    rule = GateRule(pct=10)
    # Median 100, median absolute deviation 10: a robust sd of 14.826, a band of 44.5 %.
    ref = [90.0, 110.0, 90.0, 110.0, 100.0]
    assert judge_value(ref, 56, higher_is_better=True, rule=rule)[0] == "pass"
    verdict, median, sd, change, band = judge_value(ref, 55, higher_is_better=True, rule=rule)
    assert (verdict, median, change) == ("regression", 100, -45)
    assert sd == pytest.approx(MAD_TO_SD * 10) and band == pytest.approx(3 * MAD_TO_SD * 10)
    # A steady reference: the 10 % floor.
    steady = [100.0] * 5
    assert judge_value(steady, 89, higher_is_better=True, rule=rule)[0] == "regression"
    assert judge_value(steady, 111, higher_is_better=False, rule=rule)[0] == "regression"
    assert judge_value(steady, 89, higher_is_better=False, rule=rule)[0] == "improvement"
    assert judge_value(steady[:4], 1, higher_is_better=True, rule=rule)[0] == "not-enough-history"


def test_one_disturbed_reference_run_does_not_blind_the_gate() -> None:
    """A run a busy neighbour slowed to a third sits in the reference: the sample sd would
    widen the band past 100 %; the median and its absolute deviation do not move."""
    ref = [61_000.0, 60_800, 61_300, 20_000, 61_100]
    verdict, median, _, change, band = judge_value(
        ref, 30_000, higher_is_better=True, rule=GateRule(pct=10)
    )
    assert verdict == "regression" and median == 61_000
    assert change is not None and band is not None and change < -50 and band == 10
    sample_sd = statistics.stdev(ref)
    assert 3 * sample_sd / statistics.mean(ref) > 0.9  # what the mean and sd would allow


@settings(max_examples=300, deadline=None)
@given(
    ref=st.lists(st.floats(1, 1e7, allow_nan=False), min_size=0, max_size=30),
    value=st.floats(0, 1e7, allow_nan=False),
    higher=st.booleans(),
    pct=st.floats(0, 50),
)
def test_verdicts_follow_the_written_rule(
    ref: list[float], value: float, higher: bool, pct: float
) -> None:
    rule = GateRule(pct=pct)
    verdict, *_ = judge_value(ref, value, higher_is_better=higher, rule=rule)
    if len(ref) < 5:
        assert verdict == "not-enough-history"
        return
    ordered = sorted(ref)  # the median and the median absolute deviation, by hand
    n = len(ordered)
    median = (ordered[(n - 1) // 2] + ordered[n // 2]) / 2
    deviations = sorted(abs(v - median) for v in ref)
    mad = (deviations[(n - 1) // 2] + deviations[n // 2]) / 2
    change = (value - median) / median * 100
    band = max(pct, 3 * 1.4826 * mad / median * 100)
    if abs(abs(change) - band) < 1e-6 * max(1.0, band):
        return  # on the edge: floating-point rounding decides either way
    if abs(change) <= band:
        assert verdict == "pass"
    else:
        worse = change < 0 if higher else change > 0
        assert verdict == ("regression" if worse else "improvement")


@settings(max_examples=60, deadline=None)
@given(
    iops=st.lists(st.floats(1_000, 100_000), min_size=1, max_size=16),
    bs=st.sampled_from([512, 4096, 8192, 65536, 1 << 20]),
)
def test_bandwidth_never_disagrees_with_iops(iops: list[float], bs: int) -> None:
    mon, series = monitor()
    for i, v in enumerate(iops):
        run = SimpleNamespace(
            id=f"r-{i:032x}", engine="fio", targets=["t"], target="t", target_facts=None, tags={}
        )
        agg = aggregate(v, 1e6, bw_bytes=v * bs * (1 + 1e-12 * (i % 3)))  # summed in another order
        result = stored_result(
            started_at_ms=i,
            mounts=[{"alias": "t", "fstype": "nfs", "source": "s", "options": ""}],
        )
        gate = mon.record(cast(Run, run), [agg], [result]).gate
        by = {m.metric: m.verdict for m in gate.metrics}
        assert by["read.bw_bytes"] == by["read.iops"]
    changes: dict[str, set[str]] = {}
    for r in series.regressions():
        if r.method == "e-divisive":
            changes.setdefault(r.metric, set()).add(r.first_run_id)
    assert changes.get("read.bw_bytes") == changes.get("read.iops")


def test_a_change_triaged_expected_becomes_the_norm() -> None:
    mon, series = monitor()
    for i, iops in enumerate(GOOD + SLOW[:2]):
        record(mon, i, iops, 2e6)
    reg = next(r for r in series.regressions() if r.metric == "read.iops")
    mon.triage(reg.series_key, reg.id, "expected")
    later = [record(mon, 20 + i, 15_250, 2e6) for i in range(4)]
    found = [{m.metric: m for m in g.metrics}["read.iops"] for g in later]
    # Two accepted points, then each new one joins: enough history at the fifth.
    assert [v.verdict for v in found] == ["not-enough-history"] * 3 + ["pass"]
    assert found[-1].reference.since_run_id == reg.first_run_id
    assert found[-1].reference.points == 5


def test_after_a_fix_the_old_level_passes_and_the_slow_runs_stay_out() -> None:
    mon, series = monitor()
    for i, iops in enumerate(GOOD + SLOW[:3]):
        record(mon, i, iops, 2e6)
    reg = next(r for r in series.regressions() if r.metric == "read.iops")
    mon.triage(reg.series_key, reg.id, "fixed")
    gate = record(mon, 30, 61_000, 2e6)
    iops = {m.metric: m for m in gate.metrics}["read.iops"]
    assert iops.verdict == "pass" and iops.reference.points == len(GOOD)
    # A new slowdown after the fix is a new event, reported again.
    record(mon, 31, 15_000, 2e6)
    firsts = {r.first_run_id for r in series.regressions() if r.method == "gate"}
    assert firsts == {f"r-{6:032x}", f"r-{31:032x}"}


def test_new_infrastructure_has_no_history_and_is_never_a_regression() -> None:
    mon, _ = monitor()
    for i, iops in enumerate(GOOD):
        record(mon, i, iops, 2e6)
    gate = record(mon, 10, 15_000, 8e6, infra="nfs4")
    assert gate.verdict == "not-enough-history"
    assert "new infrastructure" in gate.metrics[0].why


def test_the_run_verdict_is_its_worst_metric() -> None:
    mon, _ = monitor()
    for i, iops in enumerate(GOOD):
        record(mon, i, iops, 2e6)
    faster_but_slower_tail = record(mon, 10, 80_000, 4e6)
    assert faster_but_slower_tail.verdict == "regression"
    by = {m.metric: m.verdict for m in faster_but_slower_tail.metrics}
    assert by == {
        "read.iops": "improvement",
        "read.bw_bytes": "improvement",
        "read.lat.p99": "regression",
    }
    assert run_verdict([]) == "not-enough-history"


def test_compare_never_has_bandwidth_disagree_with_iops() -> None:
    """Their noise estimates differ a little (bytes summed in another order, other runs);
    at the edge of the band they could fall either side: bandwidth follows IOPS."""
    a, b = aggregate(100_000, 1e6), aggregate(93_950, 1e6)
    rows = {r.metric: r for r in compare_aggregates(a, b, {"read.iops": 2.0, "read.bw_bytes": 2.1})}
    assert rows["read.iops"].verdict == "worse"  # -6.05 % beyond 3 x 2.0 %
    assert rows["read.bw_bytes"].verdict == "worse"  # would be within 3 x 2.1 % alone


def test_the_gate_watches_total_latency_and_reads_older_points_by_their_names() -> None:
    """p99 total latency (``read.lat.p99``) is gated; completion latency is not. Points
    recorded before latency named its kind held completion latency as ``read.p99``: their
    IOPS count in the reference, their latency is completion latency (``read.clat.p99``),
    never a reference for total latency."""
    mon, series = monitor()
    key = ""
    for i, iops in enumerate(GOOD):
        record(mon, i, iops, 2e6)
        (point,) = [p for p in series.pts.values() if p.run_id == f"r-{i:032x}"]
        key = point.series_key
        # As a point of that time was stored: ``read.p99`` (completion), no total latency.
        legacy = {"read.iops": iops, "read.bw_bytes": iops * BS, "read.p99": 2e6 - 2e3}
        series.pts[point.id] = point.model_copy(update={"metrics": legacy, "gate": {}})
    gate = record(mon, 10, 61_000, 8e6)  # four times the tail, the same IOPS
    by = {m.metric: m for m in gate.metrics}
    assert set(by) == {"read.iops", "read.bw_bytes", "read.lat.p99"}
    assert by["read.iops"].verdict == "pass" and by["read.iops"].reference.points == len(GOOD)
    assert by["read.lat.p99"].verdict == "not-enough-history"
    assert by["read.lat.p99"].reference.points == 0
    history = mon.history(key).model_dump(mode="json")["history"]
    assert history[0]["read.clat.p99"] == 2e6 - 2e3 and "read.p99" not in history[0]
    # Five runs with total latency later, the slower tail fails the gate.
    for i in range(5):
        record(mon, 11 + i, 61_000, 2e6)
    slow = {m.metric: m for m in record(mon, 20, 61_000, 8e6).metrics}
    assert slow["read.lat.p99"].verdict == "regression"
    assert slow["read.lat.p99"].reference.median == 2e6
    assert "read.clat.p99" not in slow  # completion latency: change-point detection only


def test_the_series_report_shows_the_median_and_sd_the_gate_judged_by() -> None:
    """A gate regression keeps its reference's median and robust sd (not a mean): the
    series report shows them as such, each in its metric's unit."""
    mon, series = monitor()
    for i, iops in enumerate([*GOOD, SLOW[0]]):
        record(mon, i, iops, 2e6 * 61_000 / iops)
    key = next(iter(series.pts.values())).series_key
    history = mon.history(key).model_dump(mode="json")
    html = series_page(SeriesReport(history=history, generated_at="now"))
    table = html.split('id="regressions"', 1)[1].split("</table>", 1)[0]
    rows: dict[str, list[str]] = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]:
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        if cells[2] == "gate":
            rows[cells[0]] = cells
    gated = rows["read IOPS"]
    median = statistics.median(GOOD)
    sd = MAD_TO_SD * statistics.median(abs(v - median) for v in GOOD)
    assert gated[4] == f"median {median:,.0f} ± {sd:,.0f}"  # 61,050 ± 297
    assert gated[5] == f"{SLOW[0]:,.0f} ± 0"
    lat = rows["read total p99 latency"]
    p99s = [2e6 * 61_000 / v for v in GOOD]
    lat_median = statistics.median(p99s)
    lat_sd = MAD_TO_SD * statistics.median(abs(v - lat_median) for v in p99s)
    assert lat[4] == f"median {format_ns(lat_median)} ± {format_ns(lat_sd)}"
    assert lat[5] == f"{format_ns(2e6 * 61_000 / SLOW[0])} ± 0"
