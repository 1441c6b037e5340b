"""The Teams bot's pure parts: who may do what, what a refusal says, the baseline comparison
(against statistics' own mean and standard deviation), the gate verdict on a card, and that
announcing a result never raises into the run's finalization."""

from __future__ import annotations

import statistics
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

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
from core.monitoring.baseline import against_baseline
from core.monitoring.monitor import step_series_key

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
    run = {"id": "r-1", "state": "completed", "target": "t", "gate": {"verdict": "regression"}}
    assert ("Gate", "regression") in status_reply(run, "http://x").facts
    assert not any(k == "Gate" for k, _ in status_reply({**run, "gate": None}, "x").facts)


class _Series:
    def __init__(self, points: list[dict[str, Any]]) -> None:
        self._points = points

    def points(self, key: str) -> list[dict[str, Any]]:
        return [p for p in self._points if p["series_key"] == key]


class _Store:
    def __init__(self, points: list[dict[str, Any]]) -> None:
        self.series = _Series(points)


AGG = {"clients": 1, "workload": {"rw": "randread"}, "read": {"iops": 1.0}}


def _point(key: str, n: int, iops: float, infra: str = "a", run: str = "") -> dict[str, Any]:
    return {
        "id": f"{key}.{run or n}",
        "series_key": key,
        "run_id": run or f"r-{n}",
        "time_ms": n,
        "infra": infra,
        "metrics": {"read.iops": iops, "read.p99": 1e6},
    }


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(1.0, 1e6, allow_nan=False), min_size=2, max_size=12),
    st.floats(1.0, 1e6, allow_nan=False),
    st.integers(0, 4),
)
def test_the_baseline_is_the_latest_segments_earlier_runs(
    history: list[float], value: float, older_other_infra: int
) -> None:
    key = step_series_key("fio", ["t"], AGG)
    points = [_point(key, i, 5e6, infra="old") for i in range(older_other_infra)]
    base = older_other_infra
    points += [_point(key, base + i, v) for i, v in enumerate(history)]
    points.append(_point(key, base + len(history), value, run="r-me"))
    run = {"id": "r-me", "targets": ["t"], "engine": "fio", "aggregate": AGG}
    found = against_baseline(_Store(points), run, gate_pct=10.0)  # type: ignore[arg-type]
    assert found["baseline_points"] == len(history)
    row = next(r for r in found["rows"] if r["metric"] == "read.iops")
    mean = statistics.fmean(history)
    assert abs(row["baseline_mean"] - mean) <= 1e-9 * mean
    assert abs(row["baseline_std"] - statistics.stdev(history)) <= 1e-6 * max(mean, 1)
    assert abs(row["change_pct"] - (value - mean) / mean * 100) <= 1e-6
    worse = (mean - value) / mean * 100 > 10.0
    assert row["verdict"] == ("regression" if worse else "pass")


def test_no_baseline_after_an_infrastructure_change_or_for_the_first_run() -> None:
    key = step_series_key("fio", ["t"], AGG)
    run = {"id": "r-me", "targets": ["t"], "engine": "fio", "aggregate": AGG}
    points = [_point(key, 0, 100.0), _point(key, 1, 100.0, infra="new", run="r-me")]
    found = against_baseline(_Store(points), run, gate_pct=10.0)  # type: ignore[arg-type]
    assert found["rows"] == [] and "no baseline" in found["note"]
    assert against_baseline(_Store([]), {**run, "aggregate": None}, gate_pct=10)["rows"] == []  # type: ignore[arg-type]


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

    def send(self, conversation: dict[str, Any], attachments: list[Any]) -> str | None:
        self.calls += 1
        raise ConnectionError("connector down")

    def update(
        self, conversation: dict[str, Any], activity_id: str, attachments: list[Any]
    ) -> None:
        self.calls += 1
        raise ConnectionError("connector down")


RUN = {"id": "r-1", "state": "completed", "target": "t"}


def test_announcing_never_raises_and_posts_at_most_once() -> None:
    repo, down = _Repo(), _DownConnector()
    threads = Threads(repo, down, lambda _: RUN, public_url="http://x")
    threads.remember_run({**RUN, "state": "queued"}, {"conversation_reference": {}}, "card-1")
    (record,) = threads.announce("r-1")
    assert record["ok"] is False and "connector down" in record["error"]
    assert repo.open_runs() == []  # not tried again by the timer
    assert threads.refresh_open() == [] and down.calls == 1  # the update was the one call
    assert threads.announce("r-2") == [
        {"channel": "teams-bot", "ok": False, "error": "no stored conversation"}
    ]
    broken = Threads(_Repo(StoreUnavailable("db down")), down, lambda _: RUN, public_url="x")
    (record,) = broken.announce("r-1")
    assert record["ok"] is False and "db down" in record["error"]
