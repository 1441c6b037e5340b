"""The Teams bot's pure parts: who may do what, what a refusal says, the baseline comparison
(the gate's verdict, against statistics' own median), the gate verdict on a card, and that
announcing a result never raises into the run's finalization."""

from __future__ import annotations

import statistics
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.chat.action_cards import baseline_card
from core.chat.cards import gate_text, status_reply
from core.chat.identity import (
    ChatUser,
    DirectoryEntry,
    allowed,
    caller_of,
    higher_role_hint,
    refusal,
)
from core.chat.threads import Threads
from core.errors import FieldError, NotFound, StoreUnavailable
from core.models.chat import StoredConversation
from core.models.gate import RunGate
from core.models.regression import DeliveryRecord
from core.models.stored import Run
from core.monitoring.baseline import against_baseline
from core.monitoring.monitor import Monitor, step_series_key
from core.ports import Store
from tests.documents import run_view, stored_aggregate, stored_result
from tests.test_gate import Series

ALICE = ChatUser("a11ce", "Alice Example")


def test_the_highest_app_role_wins_and_no_role_means_no_access() -> None:
    entry = DirectoryEntry("alice@contoso.test", ("Bench.Reader", "Bench.Engineer"))
    caller = caller_of(ALICE, entry, None)
    assert caller is not None
    assert (caller.name, caller.role, caller.door) == ("alice@contoso.test", "engineer", "bot-m365")
    assert caller_of(ALICE, DirectoryEntry("alice@contoso.test", ()), None) is None
    fallback = caller_of(ALICE, DirectoryEntry("", ()), "reader")
    assert fallback is not None and fallback.role == "reader" and fallback.name == "aad:a11ce"


def test_each_action_needs_the_role_its_rest_call_needs() -> None:
    reader = caller_of(ALICE, DirectoryEntry("a", ("Bench.Reader",)), None)
    runner = caller_of(ALICE, DirectoryEntry("a", ("Bench.Runner",)), None)
    for action in ("status", "compare", "profiles", "targets", "refresh", "subscribe"):
        assert allowed(reader, action) and not allowed(None, action)
    for action in ("run", "rerun", "cancel"):
        assert not allowed(reader, action) and allowed(runner, action)


def test_refusals_are_polite_and_name_the_role_to_ask_for() -> None:
    assert refusal(ALICE, None, "run") == (
        "Sorry Alice, you have no role in the benchmark service yet. Ask its owners to "
        "assign you the Bench.Runner app role, then try again."
    )
    reader = caller_of(ALICE, DirectoryEntry("a", ("Bench.Reader",)), None)
    assert "cancel needs the Bench.Runner app role and you have Bench.Reader" in refusal(
        ALICE, reader, "cancel"
    )
    runner = caller_of(ALICE, DirectoryEntry("a", ("Bench.Runner",)), None)
    assert runner is not None
    crossed = [FieldError("clients", "role runner may use at most 4")]
    assert higher_role_hint(runner, crossed) == (
        "ask the service's owners for Bench.Engineer for larger runs"
    )
    assert higher_role_hint(runner, [FieldError("target", "no target 'x'")]) is None


def test_the_card_shows_the_gate_verdict_when_the_run_view_has_one() -> None:
    assert gate_text(None) is None and gate_text({}) is None
    assert gate_text({"verdict": "pass"}) == "pass"
    per_metric = {
        "read.iops": {"verdict": "regression", "change_pct": -23.456},
        "read.p99": {"verdict": "pass", "change_pct": 1.0},
    }
    assert gate_text(per_metric) == "regression: read.iops -23.5%"
    failed = {"verdict": "regression", "rule": {}, "metrics": []}
    assert ("Gate", "regression") in status_reply(run_view(gate=failed), "http://x").facts
    assert not any(k == "Gate" for k, _ in status_reply(run_view(gate=None), "x").facts)
    # The run view's gate (core.models.gate.RunGate, GET /api/runs/{id}): the metrics
    # that failed, by their change from the reference (or the change point's).
    mon, _ = _monitor()
    for i in range(6):
        _record(mon, i, 50_000)
    judged = _record(mon, 10, 12_500, run=ME).model_dump(mode="json")
    assert gate_text(judged) == "regression: read.iops -75.0%, read.bw_bytes -75.0%"
    shown = status_reply(run_view(gate=judged), "http://x").facts
    assert ("Gate", "regression: read.iops -75.0%, read.bw_bytes -75.0%") in shown
    first = _record(_monitor()[0], 0, 50_000).model_dump(mode="json")
    assert gate_text(first) == "not enough history"
    two_steps = {
        "verdict": "regression",
        "metrics": [
            {"step": 0, "metric": "read.iops", "verdict": "pass", "change_pct": 1.0},
            {
                "step": 1,
                "metric": "read.iops",
                "verdict": "regression",
                "change_pct": None,
                "change_point": {"change_pct": -30.04},
            },
        ],
    }
    assert gate_text(two_steps) == "regression: step 1 read.iops -30.0%"


# A step's aggregate as a run's view serves it.
AGGREGATE = stored_aggregate(workload={"rw": "randread", "bs": "4k"}, read={"iops": 1.0})
AGG = AGGREGATE.doc()


def _monitor() -> tuple[Monitor, Series]:
    series = Series()
    return Monitor(cast(Store, SimpleNamespace(series=series, runs=None)), gate_pct=10), series


def _record(mon: Monitor, n: int, iops: float, infra: str = "ext4", run: str = "") -> RunGate:
    """A run's step recorded as the timer records it (the gate judges it there)."""
    who = SimpleNamespace(
        id=run or f"r-{n:032x}", engine="fio", targets=["t"], target="t", target_facts=None, tags={}
    )
    read = {"iops": iops, "bw_bytes": iops * 4096, "lat_ns": LAT}
    agg = stored_aggregate(workload=AGG["workload"], read=read)
    result = stored_result(
        started_at_ms=1_000 + n,
        mounts=[{"alias": "t", "fstype": infra, "source": "/dev/x", "options": ""}],
    )
    return mon.record(cast(Run, who), [agg], [result]).gate


LAT = {"p50": 4e5, "p99": 1e6, "p99.9": 2e6}
ME = "r-" + "e" * 32


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-0.04, 0.04), min_size=1, max_size=12),
    st.floats(0.2, 2.0),
    st.integers(0, 4),
)
def test_the_baseline_comparison_is_the_gates_verdict(
    noise: list[float], ratio: float, older_other_infra: int
) -> None:
    """Compare with baseline shows what the gate judged when the run was finalized: the
    reference's median and robust sd of the latest segment's earlier runs (checked here by
    hand against statistics), the change, the band and the verdict (core.analysis.gate)."""
    mon, series = _monitor()
    for i in range(older_other_infra):
        _record(mon, i, 5e6, infra="xfs")
    history = [50_000 * (1 + e) for e in noise]  # steady: none of them judged a change
    for i, v in enumerate(history):
        _record(mon, 10 + i, v)
    value = 50_000 * ratio
    gate = _record(mon, 100, value, run=ME)
    run = run_view(id=ME, aggregate=AGG)
    found = against_baseline(cast(Store, SimpleNamespace(series=series)), run)
    assert found.series_key == step_series_key("fio", ["t"], AGGREGATE)
    assert found.baseline_points == len(history)
    rows = {r.metric: r.model_dump() for r in found.rows}
    assert set(rows) == {"read.iops", "read.bw_bytes", "read.lat.p99"}
    judged = {m.metric: m for m in gate.metrics}
    for metric, row in rows.items():
        assert row["verdict"] == judged[metric].verdict  # what the gate said, nothing else
    row = rows["read.iops"]
    if len(history) < 5:
        assert row["verdict"] == "not-enough-history" and row["median"] is None
        assert f"{len(history)} reference run(s); the gate needs 5" in row["why"]
        return
    median = statistics.median(history)
    sd = 1.4826 * statistics.median(abs(v - median) for v in history)
    assert row["median"] == pytest.approx(median, rel=1e-12)
    assert row["sd"] == pytest.approx(sd, rel=1e-9, abs=1e-9)
    change = (value - median) / median * 100
    band = max(10.0, 3 * sd / median * 100)
    assert row["change_pct"] == pytest.approx(change, rel=1e-9, abs=1e-9)
    assert row["band_pct"] == pytest.approx(band, rel=1e-9)
    if abs(abs(change) - band) > 1e-6:
        want = "pass" if abs(change) <= band else "regression" if change < 0 else "improvement"
        assert row["verdict"] == want


def test_no_baseline_after_an_infrastructure_change_or_for_the_first_run() -> None:
    mon, series = _monitor()
    store = cast(Store, SimpleNamespace(series=series))
    run = run_view(id=ME, aggregate=AGG)
    assert against_baseline(store, run).note == "not in a series"
    _record(mon, 0, 100.0)
    _record(mon, 1, 100.0, infra="nfs4", run=ME)
    found = against_baseline(store, run)
    assert found.rows == [] and "no baseline" in str(found.note)
    assert against_baseline(store, run_view(id=ME)).rows == []


def test_the_baseline_card_shows_each_figure_in_its_unit_with_the_gates_words() -> None:
    mon, series = _monitor()
    for i in range(6):
        _record(mon, i, 50_000)
    _record(mon, 10, 12_500, run=ME)
    found = against_baseline(
        cast(Store, SimpleNamespace(series=series)), run_view(id=ME, aggregate=AGG)
    )
    shown = {
        f["title"]: f["value"]
        for f in baseline_card(ME, found, "http://x").model_dump(mode="json")["body"][2]["facts"]
    }
    assert shown["read IOPS"] == "50,000 → 12,500 (-75.0%, band 10.0%: regression)"
    assert shown["read MiB/s"] == "195.3 MiB/s → 48.8 MiB/s (-75.0%, band 10.0%: regression)"
    assert shown["read total p99 latency"] == "1 ms → 1 ms (+0.0%, band 10.0%: pass)"


class _Repo:
    def __init__(self, fail_get: Exception | None = None) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        self.fail_get = fail_get

    def upsert(self, doc: dict[str, Any]) -> None:
        self.docs[doc["id"]] = doc

    def get(self, doc_id: str) -> dict[str, Any]:
        if self.fail_get:
            raise self.fail_get
        if doc_id not in self.docs:
            raise NotFound(doc_id)
        return self.docs[doc_id]

    def delete(self, doc_id: str) -> None:
        self.docs.pop(doc_id)

    def open_runs(self) -> list[dict[str, Any]]:
        return [d for d in self.docs.values() if d.get("kind") == "run" and not d["announced"]]

    def subscribers(self, series_key: str) -> list[dict[str, Any]]:
        return []


class _DownConnector:
    def __init__(self) -> None:
        self.calls = 0

    def send(self, conversation: StoredConversation, attachments: list[Any]) -> str | None:
        self.calls += 1
        raise ConnectionError("connector down")

    def update(
        self, conversation: StoredConversation, activity_id: str, attachments: list[Any]
    ) -> None:
        self.calls += 1
        raise ConnectionError("connector down")


RUN = run_view(id="r-" + "1" * 32)
QUEUED = run_view(id=RUN.id, state="queued")
NOWHERE = StoredConversation()


class _Connector:
    def send(self, conversation: StoredConversation, attachments: list[Any]) -> str | None:
        return "result-card"

    def update(
        self, conversation: StoredConversation, activity_id: str, attachments: list[Any]
    ) -> None:
        pass


def test_a_run_thread_expires_once_its_result_is_posted_and_not_before() -> None:
    """A finished delivery (core.retention): the thread carries Cosmos DB's per-item ttl
    once its result is posted; open threads and subscriptions carry none (they stay)."""
    repo = _Repo()
    threads = Threads(repo, _Connector(), lambda _: RUN, public_url="x", finished_ttl_s=604_800)
    threads.remember_run(QUEUED, NOWHERE, "card-1")
    assert "ttl" not in repo.docs[f"run.{RUN.id}"]  # open: Cosmos DB takes no null ttl either
    assert threads.refresh_open() == [RUN.id] and "ttl" not in repo.docs[f"run.{RUN.id}"]
    threads.subscribe("k", NOWHERE, "someone")
    (record,) = threads.announce(RUN.id)
    assert record.ok is True
    assert repo.docs[f"run.{RUN.id}"]["ttl"] == 604_800 and repo.docs[f"run.{RUN.id}"]["announced"]
    (sub,) = [d for d in repo.docs.values() if d["kind"] == "subscription"]
    assert "ttl" not in sub
    kept = Threads(_Repo(), _Connector(), lambda _: RUN, public_url="x")  # no TTL given
    kept.remember_run(QUEUED, NOWHERE, "card-1")
    kept.announce(RUN.id)
    assert "ttl" not in cast(_Repo, kept.repo).docs[f"run.{RUN.id}"]


def test_announcing_never_raises_and_posts_at_most_once() -> None:
    repo, down = _Repo(), _DownConnector()
    threads = Threads(repo, down, lambda _: RUN, public_url="http://x")
    threads.remember_run(QUEUED, NOWHERE, "card-1")
    (record,) = threads.announce(RUN.id)
    assert record.ok is False and "connector down" in str(record.error)
    assert repo.open_runs() == []  # not tried again by the timer
    assert threads.refresh_open() == [] and down.calls == 1  # the update was the one call
    assert threads.announce("r-2") == [
        DeliveryRecord(channel="teams-bot", ok=False, error="no stored conversation")
    ]
    broken = Threads(_Repo(StoreUnavailable("db down")), down, lambda _: RUN, public_url="x")
    (record,) = broken.announce(RUN.id)
    assert record.ok is False and "db down" in str(record.error)
