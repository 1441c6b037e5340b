"""The live path's pure logic (issue 26.5): fio's status outputs into samples, the ring kept
per item, and the per-second figures per client and in total.

Checked against fio itself: a real fio output (tests/data/fio-live: randrw at rate_iops
300,200 per job, 2 jobs, a 1 s ramp, ``--status-interval=1``) whose final output says how
many I/Os and what mean latency the measured period had; and, for the totals, against a
brute-force sum millisecond by millisecond."""

from __future__ import annotations

import itertools
import json
from collections import deque
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.live import LiveRelay
from core.engines.fio_live import LiveSampler, snapshot
from core.memory import Effect, MemoryArtifacts, MemoryQueues, MemoryStore, SimClock
from core.models.holder import AgentRef
from core.models.live import LIVE_RING, LiveDirection, LiveDoc, LiveSample
from core.runs.live import merged, record
from core.runs.live_view import START_SLACK_MS, client_seconds, live_view, total_seconds
from core.runs.service import RunService

DATA = Path(__file__).parent / "data" / "fio-live"
pytestmark = pytest.mark.unit


def outputs(name: str = "status.json") -> list[dict[str, object]]:
    text = (DATA / name).read_text()
    decoder, docs, at = json.JSONDecoder(), [], text.find("{")
    while at >= 0:
        doc, at = decoder.raw_decode(text, at)
        docs.append(doc)
        at = text.find("{", at)
    return docs


def measured_from(docs: list[dict[str, object]]) -> int:
    """Just after the last output of the ramp (I/Os but no latency recorded yet): fio's
    ramp ended after it. The agent knows it better: its gate's release plus the ramp."""
    ramp = [d for d in docs if (s := snapshot(d)) is not None and s.in_ramp]
    assert len(ramp) == 1
    t = ramp[0]["timestamp_ms"]
    assert isinstance(t, int)
    return t + 100


def test_samples_telescope_to_fios_final_counts_and_mean_latency() -> None:
    docs = outputs()
    sampler = LiveSampler(measured_from(docs))
    samples = [s for d in docs if (s := sampler.add(d)) is not None]
    final = docs[-1]["jobs"][0]  # type: ignore[index]
    # The final output came 16 ms after the last status output: folded, not a sample.
    assert len(samples) == 4
    for direction, rate in (("read", 600), ("write", 400)):
        parts = [getattr(s, direction) for s in samples]
        assert all(p is not None for p in parts)
        ios = sum(p.ios for p in parts)
        # Every I/O of the measured period is in exactly one sample (bar the 16 ms tail).
        assert ios == final[direction]["total_ios"]
        n = final[direction]["lat_ns"]["N"]
        mean = sum(p.lat_mean_ns * p.ios for p in parts) / n
        assert mean == pytest.approx(final[direction]["lat_ns"]["mean"], rel=1e-6)
        # rate_iops holds each second to its cap: 300 + 300 reads, 200 + 200 writes.
        for s, p in zip(samples, parts, strict=True):
            assert p.ios * 1000 / s.dur_ms == pytest.approx(rate, rel=0.03)
            assert p.bytes == pytest.approx(p.ios * 4096, abs=2 * 4096)  # in flight: 2 jobs
    assert [s.start_ms for s in samples[1:]] == [s.end_ms for s in samples[:-1]]


def test_a_seconds_bytes_are_its_ios_times_the_block_size() -> None:
    """fio reads a status output's bytes before its I/O counts (core.engines.fio_live): in
    this real output a second had 602 reads and 600 reads' worth of bytes. Given the job's one
    block size, a sample's bytes are its I/Os times it, and still add up to fio's final bytes."""
    docs = outputs()
    lagging = LiveSampler(measured_from(docs))
    raw = [s for d in docs if (s := lagging.add(d)) is not None]
    assert any(s.read is not None and s.read.bytes != s.read.ios * 4096 for s in raw)
    sampler = LiveSampler(measured_from(docs), io_size=4096)
    samples = [s for d in docs if (s := sampler.add(d)) is not None]
    final = docs[-1]["jobs"][0]  # type: ignore[index]
    for direction in ("read", "write"):
        parts = [getattr(s, direction) for s in samples]
        assert all(p.bytes == p.ios * 4096 for p in parts)
        assert sum(p.bytes for p in parts) == final[direction]["io_bytes"]
    assert [s.read for s in samples] != [s.read for s in raw]


def test_outputs_before_the_measured_start_and_in_the_ramp_are_not_samples() -> None:
    docs = outputs()
    last = docs[-1]["timestamp_ms"]
    assert isinstance(last, int)
    assert [LiveSampler(last).add(d) for d in docs] == [None] * len(docs)
    # Told the measured period began before the ramp's output, the sampler still knows
    # the ramp by its missing latency and starts counting after it.
    first = docs[0]["timestamp_ms"]
    assert isinstance(first, int)
    early = LiveSampler(first - 5000)
    samples = [s for d in docs if (s := early.add(d)) is not None]
    # It starts where fio says its counters did: the next output's stamp less its runtime
    # (999 ms), 108 ms after the ramp's output.
    assert samples[0].start_ms == docs[1]["timestamp_ms"] - 999 == first + 108  # type: ignore[operator]
    assert samples[0].read is not None and samples[0].read.ios == 602


def test_a_ramp_output_without_latency_counts_is_still_known_by_its_runtime() -> None:
    """An fio that writes no ``lat_ns.N`` (its completions are then its I/Os) shows no ramp
    by its latency; its runtime during the ramp counts from the job's start, before the
    measured start, so that output is still not a sample and the next one starts at fio's
    counters' start."""
    docs = outputs()
    for doc in docs:
        for job in doc["jobs"]:  # type: ignore[attr-defined]
            for d in ("read", "write"):
                job[d]["lat_ns"].pop("N")
    # The agent's measured start (its release plus the ramp) came just before this output,
    # still in fio's ramp: fio's job started after the release.
    ramp = docs[0]["timestamp_ms"]
    assert isinstance(ramp, int)
    sampler = LiveSampler(ramp - 10)
    samples = [s for d in docs if (s := sampler.add(d)) is not None]
    final = docs[-1]["jobs"][0]  # type: ignore[index]
    assert len(samples) == 4
    assert samples[0].start_ms == docs[1]["timestamp_ms"] - 999  # type: ignore[operator]
    assert [s.start_ms for s in samples[1:]] == [s.end_ms for s in samples[:-1]]
    assert sum(s.read.ios for s in samples if s.read) == final["read"]["total_ios"]


def test_a_last_status_output_after_fio_stopped_counts_only_the_time_it_measured() -> None:
    """A real fio output (tests/data/fio-live/ended-*: the agent's job file, 400 IOPS on
    tmpfs, 6 s after a 1 s ramp, the CPUs loaded; json+'s ``bins`` removed, the sampler
    reads none). Its last status output came 60 ms after fio's runtime had stopped at
    6000 ms: stamp to stamp, that second read 374.5 IOPS against the cap (the live test's
    372.8). fio's runtime times it: 397 I/Os in 1000 ms."""
    docs = outputs("ended-status.json")
    stamps = [cast(int, d["timestamp_ms"]) for d in docs]
    runs = [d["jobs"][0]["read"]["runtime"] for d in docs]  # type: ignore[index]
    ios = [d["jobs"][0]["read"]["total_ios"] for d in docs]  # type: ignore[index]
    # The situation: the last status output's stamp is 1060 ms after the one before, fio's
    # runtime 1000 ms; the final output 18 ms later counts no more I/Os.
    assert (stamps[-2] - stamps[-3], runs[-2] - runs[-3], ios[-2] - ios[-3]) == (1060, 1000, 397)
    assert ios[-1] == ios[-2] and runs[-1] == runs[-2] == 6002
    ramp_end = stamps[0] - runs[0] + 1000  # the job's start (its ramp's runtime) + 1 s
    sampler = LiveSampler(ramp_end, io_size=4096)
    samples = [s for d in docs if (s := sampler.add(d)) is not None]
    assert len(samples) == 6 and [s.dur_ms for s in samples] == [999, 1001, 1000, 1000, 1002, 1000]
    assert [s.start_ms for s in samples[1:]] == [s.end_ms for s in samples[:-1]]
    assert samples[-1].end_ms == stamps[-2] - 60  # where fio stopped, not its stamp
    for s in samples:
        assert s.read is not None and s.read.ios * 1000 / s.dur_ms == pytest.approx(400, rel=0.01)
    # Every I/O of the measured period is in one sample, and the period is fio's runtime.
    assert sum(s.read.ios for s in samples if s.read) == ios[-1]
    assert samples[-1].end_ms - samples[0].start_ms == runs[-1]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 48_000), max_size=12))
def test_the_relay_reads_a_file_written_in_any_pieces_as_a_whole(
    tmp_path_factory: pytest.TempPathFactory, cuts: list[int]
) -> None:
    """fio appends its outputs while the relay reads: half-written objects wait. Each
    heartbeat with something new carries the ring; one with nothing new carries none."""
    data = (DATA / "status.json").read_bytes()
    start = measured_from(outputs())
    whole = tmp_path_factory.mktemp("whole") / "fio.json"
    whole.write_bytes(data)
    expected = LiveRelay(whole, measured_from_ms=start).pending()
    growing = tmp_path_factory.mktemp("growing") / "fio.json"
    relay = LiveRelay(growing, measured_from_ms=start)
    rings: list[list[LiveSample]] = []
    with growing.open("wb") as f:
        for cut in [*sorted(set(cuts)), len(data)]:
            f.write(data[f.tell() : cut])
            f.flush()
            got = relay.pending()
            relay.sent(got)
            if got:
                rings.append(got)
                assert relay.pending() == []  # nothing new since: nothing to send
    assert rings[-1] == expected and len(expected) == 4
    # Each ring sent is the one before and what came since, in order.
    for before, after in itertools.pairwise(rings):
        assert after[: len(before)] == before and len(after) > len(before)


def sample(end: int, dur: int = 1000, ios: int = 1000, lat: float | None = 100.0) -> LiveSample:
    return LiveSample(
        end_ms=end, dur_ms=dur, read=LiveDirection(ios=ios, bytes=ios * 4096, lat_mean_ns=lat)
    )


@given(st.lists(st.lists(st.integers(1, 10_000), max_size=20), max_size=10))
def test_the_ring_keeps_the_newest_once_each_in_order(beats: list[list[int]]) -> None:
    ring: list[LiveSample] = []
    for beat in beats:
        ring = merged(ring, [sample(t) for t in beat])
    ends = [s.end_ms for s in ring]
    every = sorted({t for beat in beats for t in beat})
    assert ends == every[-LIVE_RING:]


def test_a_long_run_never_grows_its_document_past_the_ring() -> None:
    """Ten minutes of heartbeats, each with the agent's ring (the last minute, agent.live)
    and sometimes a ring a second stale (two beats overlapping): one document, the ring."""
    store = MemoryStore(lambda: 0.0)
    ring: deque[LiveSample] = deque(maxlen=LIVE_RING)

    def beat(agent: str, samples: list[LiveSample]) -> None:
        record(
            store.live,
            run_id="r",
            item_id="r.s0.c0",
            step=0,
            client=0,
            agent_id=agent,
            samples=samples,
        )

    for k in range(1, 601):
        stale = list(ring)
        ring.append(sample(1000 * k))
        beat("a", list(ring))
        if k % 7 == 0:
            beat("a", stale)  # the older beat's write lands last
            beat("a", list(ring))  # and the next beat makes it good
    doc = store.live.get("r", "r.s0.c0")
    assert [s.end_ms for s in doc.samples] == [1000 * k for k in range(541, 601)]
    size = len(json.dumps(store.table["live"].docs[("r", "r.s0.c0")]))
    assert size < 10_000  # both directions would be ~12 kB: far under Cosmos DB's 2 MB
    beat("a", [sample(1000 * k) for k in range(1, 200)])  # more than a ring: the newest kept
    assert len(store.live.get("r", "r.s0.c0").samples) == LIVE_RING
    # The item redelivered to another agent: its ring replaces the last holder's.
    beat("b", [sample(700_000)])
    got = store.live.get("r", "r.s0.c0")
    assert (got.agent_id, [s.end_ms for s in got.samples]) == ("b", [700_000])


def brute_total(rings: list[list[LiveSample]], b0: int, b1: int) -> float:
    """I/Os in [b0, b1), millisecond by millisecond, each interval's I/Os spread evenly."""
    total = 0.0
    for ring in rings:
        for s in ring:
            assert s.read is not None
            for _ms in range(max(b0, s.start_ms), min(b1, s.end_ms)):
                total += s.read.ios / s.dur_ms
    return total


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, START_SLACK_MS),  # when the client's gate opened
            st.lists(
                st.tuples(st.integers(600, 1400), st.integers(0, 5000)), min_size=1, max_size=6
            ),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_the_total_adds_each_second_up_as_a_brute_force_sum_does(
    clients: list[tuple[int, list[tuple[int, int]]]],
) -> None:
    origin = 1_000_000
    rings = []
    for offset, intervals in clients:
        t, ring = origin + offset, []
        for dur, ios in intervals:
            t += dur
            ring.append(sample(t, dur, ios))
        rings.append(ring)
    total = total_seconds(rings, origin)
    covered_to = min(r[-1].end_ms for r in rings)
    assert [s.start_ms for s in total] == [
        origin + 1000 * k for k in range((covered_to - origin) // 1000)
    ]
    for s in total:
        assert s.live_iops == pytest.approx(brute_total(rings, s.start_ms, s.end_ms), abs=0.2)


def test_a_second_some_client_has_not_reported_is_not_totalled() -> None:
    a = [sample(1000 * k) for k in range(1, 6)]
    b = [sample(1000 * k) for k in range(1, 4)]  # late: its last two seconds not here yet
    total = total_seconds([a, b], 0)
    assert [(s.start_ms, s.live_iops) for s in total] == [(0, 2000), (1000, 2000), (2000, 2000)]


def test_figures_per_client_and_in_total_with_latency_weighted_by_ios() -> None:
    a = [sample(1000 * k, ios=3000, lat=100.0) for k in range(1, 4)]
    b = [sample(1000 * k, ios=1000, lat=500.0) for k in range(1, 4)]
    docs = [
        LiveDoc(id=f"r.s1.c{c}", run_id="r", step=1, client=c, agent_id=f"ag{c}", samples=s)
        for c, s in enumerate((a, b))
    ] + [LiveDoc(id="r.s0.c0", run_id="r", step=0, client=0, agent_id="ag0", samples=a)]
    view = live_view("r", "running", docs, origins={1: 0}, sizes={0: 1, 1: 2})
    assert view.step == 1 and view.latency == "total" and view.step_clients == 2
    assert [c.client for c in view.clients] == [0, 1]
    first = view.clients[0].seconds[0]
    assert (first.live_iops, first.live_mib_s, first.live_lat_mean_ns) == (3000, 11.719, 100.0)
    assert first.read is not None and first.write is None
    assert [s.live_iops for s in view.total] == [4000, 4000, 4000]
    assert view.total[0].live_lat_mean_ns == 200.0  # (3000 * 100 + 1000 * 500) / 4000
    assert len(live_view("r", "running", docs, seconds=2).total) == 2
    # One of the step's three clients has not reported yet: no total passes for the step's.
    some = live_view("r", "running", docs, origins={1: 0}, sizes={1: 3})
    assert some.total == [] and some.step_clients == 3 and len(some.clients) == 2
    assert live_view("r", "running", docs, step=0).clients[0].agent_id == "ag0"
    assert client_seconds([]) == []
    empty = live_view("r", "queued", [])
    assert (empty.step, empty.clients, empty.total) == (None, [], [])


class LiveFaults:
    """Every write to the live container gets ``effect``; the rest go through."""

    def __init__(self) -> None:
        self.effect: Effect = "ok"

    def __call__(self, op: str, table: str, key: str) -> Effect:
        return self.effect if table == "live" and op == "upsert" else "ok"


def test_a_live_write_that_fails_fails_no_heartbeat() -> None:
    """The heartbeat carries cancellation and the lease's sign of life: whatever the live
    container does (fails, loses its answer, holds the write), the beat is answered."""
    clock, faults = SimClock(), LiveFaults()
    queues = MemoryQueues(clock)
    queues.ensure_pool("default")
    store = MemoryStore(clock, faults)
    svc = RunService(store, queues, MemoryArtifacts(), clock=clock)
    run, _ = svc.submit({"target": "scratch", "workload": {"runtime": 5}})
    item = store.items.get_item(run.id, f"{run.id}.s0.c0")
    agent = AgentRef("agent-1")
    assert svc.claim(item.work_item, agent=agent, dequeue_count=1, message_id="m").action == "run"
    assert svc.ready(run.id, item.id, agent).status == "go"
    clock.advance(1)
    t0 = int(clock() * 1000)
    ring: list[LiveSample] = []

    def ends() -> list[int]:
        return [s.end_ms - t0 for s in store.live.get(run.id, item.id).samples]

    effects: tuple[Effect, ...] = ("fail", "defer", "lost", "ok")
    for k, effect in enumerate(effects, start=1):
        faults.effect = effect
        ring.append(sample(t0 + 1000 * k))
        assert svc.heartbeat(run.id, item.id, agent, list(ring)) == {"cancel": False}
    assert ends() == [1000, 2000, 3000, 4000]  # the lost answer's write was applied too
    # The held write lands late: a ring a second stale, until the next beat.
    store.tables.apply_deferred()
    assert ends() == [1000, 2000]
    faults.effect = "ok"
    ring.append(sample(t0 + 5000))
    assert svc.heartbeat(run.id, item.id, agent, list(ring)) == {"cancel": False}
    assert ends() == [1000, 2000, 3000, 4000, 5000]
