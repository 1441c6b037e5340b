"""bench/cost.py's arithmetic (issue 29.4): request units from sizes as Microsoft's figures
give them, dollars from counts at a price, a run scaled, an idle agent-hour; checked
against hand computation and, for any counts, against a brute-force sum."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import cost
from bench.cost import Counts, Execution, Prices, RuModel, costs, idle_hour, scale, usd

MODEL = RuModel()
OPS = st.sampled_from(["read", "query", "create", "replace", "upsert", "delete"])
CALLS = st.lists(st.tuples(OPS, st.floats(0, 2048, allow_nan=False)), max_size=40)


def test_a_point_read_costs_what_microsoft_says_at_1_and_100_kb() -> None:
    assert MODEL.point_read(1) == 1.0
    assert MODEL.point_read(0.2) == 1.0  # a small document costs what 1 KB does
    assert MODEL.point_read(100) == pytest.approx(10.0)
    assert MODEL.point_read(50.5) == pytest.approx(5.5)  # halfway between the two figures


def test_dollars_are_counts_at_the_price_and_unknown_without_one() -> None:
    assert usd(2_000_000, 0.25, 1e6) == pytest.approx(0.5)
    assert usd(30_000, 0.004, 1e4) == pytest.approx(0.012)
    assert usd(123, None, 1e6) is None
    with pytest.raises(ValueError):
        usd(-1, 0.25, 1e6)


def test_the_shipped_price_file_prices_every_counted_quantity_with_its_source() -> None:
    """Every price bench/cost.py multiplies is read, and says where from and when: an idle
    agent-hour's 14,400 queue receives at $0.004 per 10,000 are $0.00576."""
    prices, _, doc = cost.load_prices(Path(cost.__file__).parent / "prices.json")
    assert None not in (
        prices.per_million_ru,
        prices.per_10k_queue_ops,
        prices.per_million_executions,
        prices.per_gb_second,
    )
    for entry in doc["prices"].values():
        assert entry["source"] and entry["read"]
    assert usd(14_400, prices.per_10k_queue_ops, 1e4) == pytest.approx(0.00576)
    assert usd(20_000, prices.per_million_executions, 1e6) == pytest.approx(0.008)


@given(CALLS)
def test_request_units_are_the_sum_over_calls(calls: list[tuple[str, float]]) -> None:
    c = Counts(db_kb=calls)
    brute = 0.0
    for op, kb in calls:
        if op == "read":
            brute += 1 + 9 * max(0.0, kb - 1) / 99
        elif op == "query":
            brute += 2.5 + kb
        else:
            brute += 5 * max(1.0, kb)
    assert c.request_units(MODEL) == pytest.approx(brute)


@given(CALLS, st.integers(0, 10_000), st.integers(0, 10_000), st.integers(1, 7))
def test_a_run_scaled_k_times_costs_k_times(
    calls: list[tuple[str, float]], queue_ops: int, http: int, k: int
) -> None:
    c = Counts(db=Counter(op for op, _ in calls), db_kb=calls, http_requests=http)
    c.queue["send"] = queue_ops
    prices = Prices(
        per_million_ru=0.25, per_10k_queue_ops=0.004, per_million_executions=0.4, per_gb_second=3e-5
    )
    one, many = costs(c, MODEL, prices), costs(scale(c, k), MODEL, prices)
    for key, value in one.items():
        assert value is not None
        assert many[key] == pytest.approx(value * k)


def test_functions_gb_seconds_are_executions_times_memory_times_duration() -> None:
    """Flex Consumption on demand bills the instance's memory while it executes: 1,000
    executions of 20 ms on 2,048 MB are 1,000 x 2 GB x 0.02 s = 40 GB-s."""
    assert Execution(memory_mb=2048, duration_ms=20).gb_seconds == pytest.approx(0.04)
    c = Counts(http_requests=1000)
    prices = Prices(per_gb_second=2.6e-5)
    figures = costs(c, MODEL, prices, Execution(memory_mb=2048, duration_ms=20))
    assert figures["gb_seconds"] == pytest.approx(40.0)
    assert figures["functions_gb_s_usd"] == pytest.approx(40 * 2.6e-5)
    assert figures["functions_usd"] is None  # no price per execution read
    half = costs(c, MODEL, prices, Execution(memory_mb=512, duration_ms=40))
    assert half["gb_seconds"] == pytest.approx(20.0)


def test_an_idle_agent_hour_is_its_receives_and_120_registry_beats() -> None:
    hour = idle_hour(14_400, 30, beat_read_kb=1.0)
    assert hour.queue["receive"] == 14_400 and hour.http_requests == 120
    assert hour.request_units(MODEL) == pytest.approx(120 * (1 + 5))


def test_the_table_from_counted_runs_and_the_price_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prices = json.loads((Path(cost.__file__).parent / "prices.json").read_text())
    prices["prices"]["cosmos_serverless_usd_per_million_ru"]["usd"] = 0.25
    # A price not read (null in the file) shows as n/a, not as $0.
    prices["prices"]["queue_usd_per_10k_operations"]["usd"] = None
    prices["prices"]["flex_usd_per_million_executions"]["usd"] = None
    (tmp_path / "prices.json").write_text(json.dumps(prices))
    (tmp_path / "idle.json").write_text(json.dumps({"rows": [{"steady_per_agent_hour": 240}]}))
    monkeypatch.setattr(cost, "OUT", tmp_path)

    def fake(n: int) -> Counts:
        c = Counts(db=Counter(read=n), db_kb=[("read", 1.0)] * n, http_requests=3 * n)
        c.queue["send"] = n
        return c

    argv = ["--clients", "1", "4", "--extrapolate", "8", "--prices", str(tmp_path / "prices.json")]
    argv += ["--execution-ms", "50", "--instance-memory-mb", "1024"]
    cost.main([*argv, "--idle", str(tmp_path / "idle.json")], count=fake)
    table = json.loads((tmp_path / "cost.json").read_text())["costs"]
    assert table["run of 4 clients"]["request_units"] == 4.0
    assert table["run of 4 clients"]["cosmos_usd"] == pytest.approx(4 * 0.25 / 1e6)
    assert table["run of 4 clients"]["queue_usd"] is None  # no price read
    assert table["8 clients (from 4, per client)"]["executions"] == 24
    assert table["idle agent-hour"]["queue_operations"] == 240
    # 3 executions of 50 ms on 1 GB, at the file's $0.000026 per GB-s
    assert table["run of 1 client"]["gb_seconds"] == pytest.approx(0.15)
    assert table["run of 1 client"]["functions_gb_s_usd"] == pytest.approx(0.15 * 2.6e-5)
    row = "| run of 1 client | 1 | 1 | 3 | 0.15 | $0.000000 | n/a | n/a | $0.000004 |"
    assert row in capsys.readouterr().out


def test_a_counted_run_costs_the_same_per_client_at_20_60_and_100_clients() -> None:
    """Each count (database calls by operation, queue operations, API requests) of a run
    is a + b x clients: a client added costs the same at 20, 60 and 100 clients (each
    step with the barrier's 16 shards: core.models.barrier_shard; fewer below 16). The
    simulated agents used to report no round trip with ready, so the start lead was the
    fallback's 1.5 s + 50 ms a client, heartbeated through by every client, and they renewed
    a 6 s lease every 3 s: per client, 11 heartbeats at 24 clients and 21 at 1,000."""
    from bench.cost_count import counted_run

    runs = [counted_run(n, runtime_s=2) for n in (20, 60, 100)]
    keyed = [
        {**{f"db {k}": v for k, v in c.db.items()}, **c.queue, "http": c.http_requests}
        for c in runs
    ]
    for key in set().union(*keyed):
        few, some, many = (k.get(key, 0) for k in keyed)
        assert many - some == some - few, key
    assert "renew" not in keyed[-1]  # the run is shorter than half the agent's lease
    # Claim, ready, a barrier poll, the result, and a heartbeat a second from the claim to
    # the end of fio's 2 s (and no more: the lead is under a second up to 200 clients).
    assert 7 <= runs[-1].http_requests / 100 < 8


def test_a_run_counts_the_uploads_its_agents_make() -> None:
    """The agents of a 10 s run upload their timeline and logs before their results (what
    real fio's 10 s packs to: bench.cost_count.UPLOADS_10S): each one API request, a Function
    execution, and one read of the item; a 2 s run's results carry everything."""
    from bench.cost_count import UPLOADS_10S, counted_run, uploads_for

    assert UPLOADS_10S == ("timeline", "logs") and uploads_for(2) == ()
    counted, bare = counted_run(20, runtime_s=10), counted_run(20, runtime_s=10, uploads=())
    assert counted.http_requests - bare.http_requests == 20 * 2
    assert counted.db["read"] - bare.db["read"] == 20 * 2
    assert counted.queue == bare.queue
