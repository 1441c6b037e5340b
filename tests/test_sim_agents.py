"""Simulated clients (simagent): the fio outputs of a declared rate read back as that rate by
the agent's own code, and a run of 16 of them through the real API, queue and timer ending
with the aggregate the rate implies and one common start instant; the calls' counting hook
(adapters.counting) names each request as its price list does."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.counting import operation
from benchctl import localstack
from benchctl.local_sim import start_sim_agents
from core.artifacts import ref, unpack_json, unpack_timeline
from core.engines.fio_logs import parse_hist_log, parse_log, plat_idx_to_val
from core.engines.fio_output import PERCENTILES, percentile_key
from core.models import HostFacts, WorkItem
from core.timeline import common_window, totals_in
from simagent.figures import DeclaredRate, bucket_value, fio_outputs, plat_val_to_idx
from simagent.measured import measure
from tests.conftest import run_body, wait_state, wait_until

RUN = "r-" + "0" * 32
HOST = HostFacts(hostname="simulated-test", kernel="", os="simulated", cpu_count=0)


def work_item(**workload: object) -> WorkItem:
    w = {"rw": "randread", "bs": "4k", "size": "8m", "runtime": 3, **workload}
    return WorkItem.model_validate(
        {
            "run_id": RUN,
            "item_id": RUN + ".s0.c0",
            "step": 0,
            "client": 0,
            "clients": 1,
            "pool": "p",
            "targets": ["a"],
            "engine": "fio",
            "workload": w,
        }
    )


@pytest.mark.unit
@given(st.integers(min_value=1, max_value=2**40))
def test_a_latency_lands_in_the_bucket_fio_would_put_it(ns: int) -> None:
    idx = plat_val_to_idx(ns)
    # Brute force: bucket i holds the values from its lower edge to the next one's; its
    # value (fio's plat_idx_to_val) is inside that range, and maps back to i.
    assert plat_idx_to_val(idx) == bucket_value(ns)
    assert plat_val_to_idx(plat_idx_to_val(idx)) == idx
    assert plat_val_to_idx(ns) >= plat_val_to_idx(ns - 1)
    assert abs(bucket_value(ns) - ns) <= max(1, ns // 64)


@pytest.mark.unit
@settings(max_examples=30, deadline=None)
@given(
    iops=st.integers(min_value=100, max_value=200_000),  # randrw: both ways, at mix 1 %
    latency_ns=st.integers(min_value=1, max_value=10**9),
    runtime=st.integers(min_value=1, max_value=20),
    rw=st.sampled_from(["randread", "write", "randrw"]),
    mix=st.integers(min_value=1, max_value=99),  # fio's check wants both ways of randrw
    bs=st.sampled_from(["4k", "64k", "1m"]),
)
def test_a_declared_rate_reads_back_as_that_rate(
    iops: int, latency_ns: int, runtime: int, rw: str, mix: int, bs: str
) -> None:
    rate = DeclaredRate(iops, latency_ns)
    item = work_item(rw=rw, rwmixread=mix, runtime=runtime, bs=bs, size="16m")
    start = 1_800_000_000_123
    m = measure(item, rate, agent_id="sim-1", host=HOST, scheduled_ms=start, started_ms=start)
    r = m.result
    # Brute force from the logs the client wrote: every line's I/Os, summed.
    out = fio_outputs(rate, item.workload, start)
    logged = sum(line.value for line in parse_log(out.iops_log))
    hist = sum(c for row in parse_hist_log(out.hist_log) for c in row.counts.values())
    assert logged == hist == iops * runtime
    dirs = [d for d in (r.read, r.write) if d is not None]
    assert sum(d.total_ios for d in dirs) == iops * runtime
    assert sum(d.iops for d in dirs) == iops
    size = {"4k": 4096, "64k": 65536, "1m": 1 << 20}[bs]
    assert sum(d.bw_bytes for d in dirs) == iops * size
    for d in dirs:
        assert set(d.clat_percentiles_ns.values()) == {float(rate.latency_ns)}
        assert set(d.clat_percentiles_ns) == {percentile_key(p) for p in PERCENTILES}
        assert d.lat_ns.mean == rate.latency_ns
    assert r.start is not None and r.start.skew_ms == 0
    assert (r.started_at_ms, r.ended_at_ms) == (start, start + runtime * 1000)
    timeline = unpack_timeline(m.artifacts["timeline"])
    window = (r.started_at_ms, r.ended_at_ms)
    ios = sum(totals_in(timeline, d, window)[0] for d in ("read", "write"))
    assert ios == pytest.approx(iops * runtime)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("service", "method", "url", "headers", "op"),
    [
        ("cosmos", "GET", "https://h/dbs/bench/colls/runs/docs/r-1", {}, "read"),
        ("cosmos", "POST", "https://h/dbs/bench/colls/runs/docs", {}, "create"),
        (
            "cosmos",
            "POST",
            "https://h/dbs/bench/colls/runs/docs",
            {"x-ms-documentdb-is-upsert": "True"},
            "upsert",
        ),
        (
            "cosmos",
            "POST",
            "https://h/dbs/bench/colls/items/docs",
            {"x-ms-documentdb-isquery": "True"},
            "query",
        ),
        (
            "cosmos",
            "POST",
            "https://h/dbs/bench/colls/items/docs",
            {"x-ms-cosmos-is-batch-request": "True"},
            "batch",
        ),
        ("cosmos", "PUT", "https://h/dbs/bench/colls/items/docs/i-1", {}, "replace"),
        ("cosmos", "PATCH", "https://h/dbs/bench/colls/items/docs/i-1", {}, "patch"),
        ("cosmos", "DELETE", "https://h/dbs/bench/colls/items/docs/i-1", {}, "delete"),
        ("cosmos", "GET", "https://h/dbs/bench/colls/items", {}, "other"),
        ("queue", "POST", "http://h/acct/work-p/messages", {}, "send"),
        ("queue", "GET", "http://h/acct/work-p/messages?numofmessages=1", {}, "receive"),
        ("queue", "GET", "http://h/acct/work-p/messages?peekonly=true", {}, "peek"),
        ("queue", "DELETE", "http://h/acct/work-p/messages/m1?popreceipt=x", {}, "delete"),
        ("queue", "PUT", "http://h/acct/work-p/messages/m1?popreceipt=x", {}, "update"),
        ("queue", "PUT", "http://h/acct/work-p", {}, "other"),
        ("blob", "PUT", "http://h/acct/c/r/i/raw", {}, "put"),
        ("blob", "HEAD", "http://h/acct/c/r/i/raw", {}, "head"),
    ],
)
def test_each_call_is_named_as_its_price_list_names_it(
    service: str, method: str, url: str, headers: dict[str, str], op: str
) -> None:
    assert operation(service, method, url, headers) == op


CLIENTS = 16  # the per-test pools' declared size (tests/conftest.py)


def completed(records: Path, run_id: str, n: int) -> list[dict[str, Any]] | None:
    if not records.exists():
        return None
    lines = [json.loads(x) for x in records.read_text().splitlines()]
    done = [d for d in lines if d["run_id"] == run_id and d["outcome"] == "completed"]
    return done if len(done) == n else None


IOPS = 500
LATENCY_US = 250.0


def test_sixteen_simulated_clients_give_the_figures_they_declare_and_start_together(
    stack: localstack.Stack,
    api: httpx.Client,
    store: CosmosStore,
    artifacts: BlobArtifacts,
    pool: str,
    tmp_path: Path,
) -> None:
    records = tmp_path / "records.jsonl"
    sims = start_sim_agents(
        stack,
        CLIENTS,
        pool=pool,
        iops=IOPS,
        latency_us=LATENCY_US,
        targets=["scratch"],
        extra=["--records", str(records), "--threads", str(CLIENTS)],
    )
    try:
        body = run_body(pool, runtime=1)
        body["clients"] = CLIENTS
        run_id = api.post("/api/runs", json=body).json()["id"]
        run = wait_state(api, run_id, ("completed", "failed"), timeout=120)
        assert run["state"] == "completed", run["error"]
        # A client writes its record when the API has answered its result.
        done = wait_until(lambda: completed(records, run_id, CLIENTS), 30, what="records")
    finally:
        localstack.stop_proc(sims, signal.SIGKILL, timeout=5)
    results = store.results.of_run(run_id)
    assert len(results) == CLIENTS
    assert len({r.agent_id for r in results}) == CLIENTS
    assert all(r.agent_id.startswith(f"sim-{pool}-") for r in results)
    assert {h.os for h in (r.host for r in results)} == {"simulated"}

    # One start instant, the step's, and every client started on it (it heard "go" in time).
    steps, _ = store.items.of_run(run_id)
    instant = steps[0].start_at_ms
    assert instant is not None
    assert {r.start.scheduled_ms for r in results if r.start} == {instant}
    assert {r.started_at_ms for r in results} == {instant}
    assert {d["start_ms"] for d in done} == {d["start_at_ms"] for d in done} == {instant}

    # The aggregate is what 16 clients at the declared rate make, and what a brute-force
    # count of their stored timelines in the common window gives.
    agg = run["aggregate"]
    assert agg["clients"] == CLIENTS and not agg["partial"]
    assert agg["read"]["iops"] == CLIENTS * IOPS
    assert agg["read"]["bw_bytes"] == CLIENTS * IOPS * 4096
    latency = bucket_value(round(LATENCY_US * 1000))
    assert {agg["read"]["clat_ns"][p] for p in ("p50", "p99", "p99.9")} == {latency}
    # Each carried in its result (agent protocol 3): none was uploaded. So were fio's output
    # and logs (protocol 4), which the API kept in Blob Storage as the result names them,
    # and not in the document.
    assert all(r.inline_timeline for r in results)
    for r in results:
        assert r.inline_artifacts is None
        for name in ("raw", "logs"):
            assert ref(name, artifacts.get(run_id, r.item_id, name)) == r.artifacts[name]
    raw = unpack_json(artifacts.get(run_id, results[0].item_id, "raw"))
    assert raw["jobs"][0]["read"]["total_ios"] == results[0].read.total_ios  # type: ignore[union-attr]
    timelines = [unpack_timeline(r.carried_timeline() or b"") for r in results]
    window = common_window(timelines)
    assert window is not None
    total = sum(totals_in(t, "read", window)[0] for t in timelines)
    assert total / ((window[1] - window[0]) / 1000) == pytest.approx(CLIENTS * IOPS)
    assert agg["start_skew_ms"]["max"] == 0
