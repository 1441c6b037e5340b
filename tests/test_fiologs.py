"""fio's logs to per-client timelines to the aggregate of the common window: checked against
known loads (properties over generated logs, and real fio capped with rate_iops on the
null engine, which makes the load exact) and against fio's own fiologparser_hist.py."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.analysis.aggregate import aggregate
from core.engines.fio_logs import FinalCounts, FinalOutput, plat_idx_to_val, timeline_from_logs
from core.models import DirectionResult, LatencyStats
from core.timeline import ClientSample, ClientTimeline, histogram_in

T0 = 1_800_000_000_000  # a Unix ms on a whole second
BS = 4096


def whole_run(iops: float) -> DirectionResult:
    """fio's whole-run figures (not used for the window's figures)."""
    stats = LatencyStats(min=1, max=1, mean=1, stddev=0)
    return DirectionResult(
        io_bytes=0,
        total_ios=1,
        runtime_ms=1,
        iops=iops,
        bw_bytes=iops * BS,
        lat_ns=stats,
        clat_ns=stats,
        clat_percentiles_ns={},
        clat_bins_ns={},
    )


def log_text(stamps: list[int], value: float) -> str:
    return "".join(f"{t}, {value:g}, 0, {BS}, 0\n" for t in stamps)


@dataclass(frozen=True)
class FakeClient:
    """A client loading at ``rate`` IOPS, split over ``jobs`` jobs, whose jobs start at
    ``start`` (ms) and log one line a second, each stamped a few ms off."""

    rate: int
    start: int
    lines: int
    jitter: tuple[int, ...]
    jobs: int = 1
    edge: str = "none"  # drop the first or last line, or add a last partial window
    partial_ms: int = 500

    def logs(self) -> tuple[list[str], list[str]]:
        iops, bw = [], []
        per_job = self.rate / self.jobs
        for j in range(self.jobs):
            stamps = [
                self.start + 1000 * (k + 1) + self.jitter[(k + j) % len(self.jitter)]
                for k in range(self.lines)
            ]
            if self.edge == "drop-first":
                stamps = stamps[1:]
            elif self.edge == "drop-last":
                stamps = stamps[:-1]
            elif self.edge == "extra":
                stamps.append(stamps[-1] + self.partial_ms)
            iops.append(log_text(stamps, per_job))
            bw.append(log_text(stamps, per_job * BS / 1024))  # fio logs KiB/s
        return iops, bw


def sample(i: int, c: FakeClient) -> ClientSample:
    tl = timeline_from_logs(*c.logs())
    assert tl is not None
    return ClientSample(client=i, dirs={"read": whole_run(c.rate)}, timeline=tl)


def window_seconds(agg: dict[str, object]) -> float:
    w = agg["window"]
    assert isinstance(w, dict)
    return float(w["seconds"])


def test_half_second_stamps_do_not_collide() -> None:
    """The reported case: 4 clients capped at 1,000/2,000/3,000/4,000 IOPS, one stamped
    exactly on the half second, over 12 s: 10,000 (nearest-second keys gave 9,922)."""
    clients = [
        FakeClient(rate=1000, start=T0, lines=12, jitter=(0, 1, 0, -1)),
        FakeClient(rate=2000, start=T0 + 3, lines=12, jitter=(1, 0, 2)),
        FakeClient(rate=3000, start=T0 + 500, lines=12, jitter=(0,)),
        FakeClient(rate=4000, start=T0 + 7, lines=12, jitter=(-1, 2, 0)),
    ]
    agg = aggregate([sample(i, c) for i, c in enumerate(clients)]).model_dump()
    assert agg["basis"] == "common-window"
    assert agg["read"]["iops"] == pytest.approx(10_000, rel=0.005)
    assert agg["read"]["bw_bytes"] == pytest.approx(10_000 * BS, rel=0.005)


def test_a_client_stamped_on_the_half_second() -> None:
    """1,000 IOPS stamped at 1.5, 2.5, 3.5, 4.5 s is 1,000 IOPS (round() keys gave 1,333)."""
    agg = aggregate(
        [sample(0, FakeClient(rate=1000, start=T0 + 500, lines=4, jitter=(0,)))]
    ).model_dump()
    assert window_seconds(agg) == 4.0
    assert agg["read"]["iops"] == pytest.approx(1000.0)
    series = agg["series"]["read"]
    assert [r["t_ms"] for r in series] == [T0 + 1500 + 1000 * k for k in range(4)]
    assert all(r["iops"] == pytest.approx(1000.0) for r in series)


def test_stamps_drifting_late_under_load_still_count_every_io() -> None:
    """fio rates each line over the time since its previous line, so when a busy machine
    makes its stamps drift 24 ms late per interval, 1,000 IOPS is still 1,000: the lines
    tile time (measured with real fio under load; clamping each line to 1 s read 977)."""
    stamps = [T0 + 1024 * (k + 1) for k in range(6)]
    tl = timeline_from_logs([log_text(stamps, 1000)], [log_text(stamps, 1000 * BS / 1024)])
    assert tl is not None
    agg = aggregate(
        [ClientSample(client=0, dirs={"read": whole_run(1000)}, timeline=tl)]
    ).model_dump()
    assert agg["read"]["iops"] == pytest.approx(1000.0, rel=0.001)
    # A gap of two intervals is an interval with no I/O (fio wrote no line): zero there.
    gap = [T0 + 1000, T0 + 2000, T0 + 4000, T0 + 5000]
    tl = timeline_from_logs([log_text(gap, 1000)], [log_text(gap, 1000 * BS / 1024)])
    assert tl is not None
    agg = aggregate(
        [ClientSample(client=0, dirs={"read": whole_run(800)}, timeline=tl)]
    ).model_dump()
    assert agg["read"]["iops"] == pytest.approx(4000 / 5, rel=0.001)


jitter = st.integers(-3, 3)
phase = st.one_of(st.just(500), st.integers(497, 503), st.integers(0, 999))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[FakeClient], int]:
    """1 to 6 clients at random rates, starts staggered by up to 3 s with any sub-second
    phase (exactly .500 and +-3 ms around it among them), stamps off by +-3 ms, some with a
    first or last line missing or a last partial window; the line counts are chosen so the
    common window lasts 2 to 3 s (and up to a partial second more)."""
    n = draw(st.integers(1, 6))
    base = T0 + draw(phase)
    width = 2000
    offsets = [draw(st.integers(0, 3000)) for _ in range(n)]
    edges = [draw(st.sampled_from(["none", "drop-first", "drop-last", "extra"])) for _ in range(n)]
    starts = [base + o for o in offsets]
    logging_from = [
        s + (1000 if e == "drop-first" else 0) for s, e in zip(starts, edges, strict=True)
    ]
    latest = max(logging_from)
    clients = []
    for s, e in zip(starts, edges, strict=True):
        lines = math.ceil((latest + width - s) / 1000) + (1 if e == "drop-last" else 0)
        clients.append(
            FakeClient(
                rate=draw(st.integers(50, 200_000)),
                start=s,
                lines=max(lines, 2),
                jitter=tuple(draw(st.lists(jitter, min_size=1, max_size=5))),
                jobs=draw(st.integers(1, 4)),
                edge=e,
                partial_ms=draw(st.integers(100, 900)),
            )
        )
    return clients, width


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_aggregate_equals_the_known_load(scenario: tuple[list[FakeClient], int]) -> None:
    clients, _ = scenario
    agg = aggregate([sample(i, c) for i, c in enumerate(clients)]).model_dump()
    seconds = window_seconds(agg)
    assert 1.99 <= seconds < 3.91  # the generator's promise
    load = sum(c.rate for c in clients)
    assert agg["read"]["iops"] == pytest.approx(load, rel=0.005)
    assert agg["read"]["bw_bytes"] == pytest.approx(load * BS, rel=0.005)
    # One point per second shown to users; what is left of the window is a point of its
    # own from half a second on, else it joins the last second.
    series = agg["series"]["read"]
    assert len(series) == max(1, math.floor(seconds + 0.5))
    ends = [agg["window"]["start_ms"], *(r["t_ms"] for r in series)]
    steps = [b - a for a, b in itertools.pairwise(ends)]
    assert all(s == 1000 for s in steps[:-1]) and 500 <= steps[-1] < 1500
    assert ends[-1] == agg["window"]["end_ms"]
    assert all(r["iops"] == pytest.approx(load, rel=0.02) for r in series[1:-1])
    # Each client's share of the window is its own load.
    for row, c in zip(agg["per_client"], clients, strict=True):
        assert row["iops"] == pytest.approx(c.rate, rel=0.005)


def timeline_of(c: FakeClient) -> ClientTimeline:
    tl = timeline_from_logs(*c.logs())
    assert tl is not None
    return tl


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_timeline_keeps_every_logged_io(scenario: tuple[list[FakeClient], int]) -> None:
    """Rebinning loses nothing inside the client's period: its bins hold rate x length."""
    for c in scenario[0]:
        tl = timeline_of(c)
        assert tl.read is not None
        length_s = (tl.end_ms - tl.start_ms) / 1000
        assert sum(tl.read.ios) == pytest.approx(c.rate * length_s, rel=0.005)


def hist_text(stamps: list[int], bucket: int, count: int) -> str:
    """Histogram log lines with ``count`` completions in bucket index ``bucket``."""
    row = ["0"] * (29 * 64)
    row[bucket] = str(count)
    return "".join(f"{t}, 0, {BS}, {', '.join(row)}\n" for t in stamps)


def test_percentiles_come_from_the_seconds_all_clients_ran() -> None:
    """Client A alone for 6 s at ~100 us, then 2 s with B at ~200 us each. The window holds
    only the slow seconds: its p50 is ~200 us. The whole runs' merged bins (what the
    aggregate reported before) say ~100 us: 30 % and more off for a late start."""
    fast, slow = 738, 802  # fio bucket indices: about 100 us and 200 us
    a_stamps = [T0 + 1000 * k for k in range(1, 9)]
    b_stamps = [T0 + 1000 * k + 2 for k in range(7, 9)]
    a_hist = hist_text(a_stamps[:6], fast, 1000) + hist_text(a_stamps[6:], slow, 1000)
    b_hist = hist_text(b_stamps, slow, 1000)
    a = timeline_from_logs([log_text(a_stamps, 1000)], [], [a_hist])
    b = timeline_from_logs([log_text(b_stamps, 1000)], [], [b_hist])
    assert a is not None and b is not None
    fast_ns, slow_ns = plat_idx_to_val(fast), plat_idx_to_val(slow)
    whole_a = {str(fast_ns): 6000, str(slow_ns): 2000}
    whole_b = {str(slow_ns): 2000}

    def direction(bins: dict[str, int]) -> DirectionResult:
        return whole_run(1000).model_copy(update={"clat_bins_ns": bins})

    agg = aggregate(
        [
            ClientSample(client=0, dirs={"read": direction(whole_a)}, timeline=a),
            ClientSample(client=1, dirs={"read": direction(whole_b)}, timeline=b),
        ]
    ).model_dump()
    assert agg["window"]["seconds"] == pytest.approx(1.998)
    assert agg["read"]["percentiles_basis"] == "common-window"
    assert agg["read"]["clat_ns"]["p50"] == slow_ns
    whole = aggregate(
        [
            ClientSample(client=0, dirs={"read": direction(whole_a)}),
            ClientSample(client=1, dirs={"read": direction(whole_b)}),
        ]
    ).model_dump()
    assert whole["read"]["percentiles_basis"] == "whole-run"
    assert whole["read"]["clat_ns"]["p50"] == fast_ns


def test_a_windows_histogram_is_its_exact_overlap_with_fios_lines() -> None:
    """Histogram lines that straddle the client's 1 s grid: the window [1 s, 2 s) holds
    exactly the second line (all slow). Spreading lines into grid bins first mixed half a
    fast line into it (a p99.9 one bucket off on real fio, against a brute-force sum)."""
    fast, slow = 738, 802
    iops = [T0 + 500 + 1000 * k for k in range(4)]  # the grid starts at T0 - 500
    hist = hist_text([T0 + 1000], fast, 1000) + hist_text([T0 + 2000], slow, 1000)
    hist += hist_text([T0 + 3000], fast, 1000)
    tl = timeline_from_logs([log_text(iops, 1000)], [log_text(iops, 4000)], [hist])
    assert tl is not None and tl.start_ms == T0 - 500
    got = histogram_in(tl, "read", (T0 + 1000, T0 + 2000))
    assert got == {plat_idx_to_val(slow): 1000.0}


@settings(max_examples=200, deadline=None)
@given(
    rate=st.integers(50, 200_000),
    jobs=st.integers(1, 4),
    runtime_ms=st.integers(1_004, 12_000),
    jitter=st.lists(st.integers(0, 3), min_size=1, max_size=5),
    late_job_line=st.booleans(),
)
# Lines stamped late hold more than fio counted (50.05 + 3 x 50 > 200): scaled to its count.
@example(rate=50, jobs=1, runtime_ms=4004, jitter=[1], late_job_line=False)
def test_the_last_partial_interval_comes_from_fios_final_totals(
    rate: int, jobs: int, runtime_ms: int, jitter: list[int], late_job_line: bool
) -> None:
    """fio counts every I/O of its runtime but logs a line only per whole interval (issue
    26.2): with its final totals the timeline runs to the end of the runtime, holds every
    I/O and histogram count, and its last, partial second is at the load's rate, also when
    one job's sample fell due just before the end and logged a line the others did not."""
    per_job = rate / jobs
    iops, bw, hists = [], [], []
    for j in range(jobs):
        whole = (runtime_ms - 4) // 1000  # lines stamped (3 ms late at most) before the end
        # Jobs start together (their first lines on time), later lines stamped late.
        stamps = [T0 + 1000 * (k + 1) + (k and jitter[(k + j) % len(jitter)]) for k in range(whole)]
        if late_job_line and j == 0 and runtime_ms % 1000 == 0:
            stamps.append(T0 + runtime_ms)
        iops.append(log_text(stamps, per_job))
        bw.append(log_text(stamps, per_job * BS / 1024))
        hists.append(hist_text(stamps, 100, 7))
    lines = sum(len(t.splitlines()) for t in hists)
    total = rate * runtime_ms / 1000
    final = FinalOutput(
        runtime_ms=runtime_ms,
        dirs={
            "read": FinalCounts(
                ios=round(total),
                bytes=round(total) * BS,
                clat_bins={str(plat_idx_to_val(100)): 7 * lines + 5},
            )
        },
    )
    tl = timeline_from_logs(iops, bw, hists, final=final)
    assert tl is not None and tl.read is not None
    assert tl.end_ms - tl.start_ms == runtime_ms
    assert sum(tl.read.ios) == pytest.approx(round(total), abs=1e-3)  # logs: 6 digits
    assert sum(tl.read.bytes) == pytest.approx(round(total) * BS, abs=1.0)
    assert sum(histogram_in(tl, "read", (tl.start_ms, tl.end_ms)).values()) == pytest.approx(
        7 * lines + 5
    )
    tail_s = (tl.end_ms - tl.start_ms - 1000 * (len(tl.read.ios) - 1)) / 1000
    if tail_s >= 0.2:  # shorter, a whole I/O is a large part of the rate
        assert tl.read.ios[-1] / tail_s == pytest.approx(rate, rel=0.02, abs=10.0)


@pytest.mark.parametrize("early_ms", [6, 16, 999])
def test_a_histogram_line_stamped_before_the_first_rate_line_counts_in_the_window(
    early_ms: int,
) -> None:
    """fio stamps a histogram line when an I/O completes (iolog.c), a rate line on its
    helper thread's tick: on a busy machine the first histogram line came 16 ms before the
    first rate line (real fio, 5 s at 2,000 IOPS), and its first second, spread back from
    its stamp, began before the period: 32 of 9,989 completions fell out of the window."""
    stamps = [T0 + 1000 * (k + 1) for k in range(4)]
    hist_stamps = [stamps[0] - early_ms, *stamps[1:]]
    final = FinalOutput(
        runtime_ms=4500,
        dirs={
            "read": FinalCounts(
                ios=4500, bytes=4500 * BS, clat_bins={str(plat_idx_to_val(100)): 4 * 7 + 5}
            )
        },
    )
    tl = timeline_from_logs(
        [log_text(stamps, 1000)],
        [log_text(stamps, 1000 * BS / 1024)],
        [hist_text(hist_stamps, 100, 7)],
        final=final,
    )
    assert tl is not None and tl.start_ms == T0
    window = (tl.start_ms, tl.end_ms)
    assert sum(histogram_in(tl, "read", window).values()) == pytest.approx(4 * 7 + 5, abs=1e-9)
