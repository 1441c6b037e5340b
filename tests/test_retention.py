"""Retention (core.retention): the rules, and the local stack honouring them. Locally the
Cosmos DB server has no TTL and Azurite no lifecycle management, so the API's timer deletes
expired replay guards and agent records and cools, then deletes, raw artifacts; what a run
or a series owns stays. In Azure the same rules are Cosmos DB TTLs and a Blob lifecycle
policy (tests/test_bicep_operations.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from adapters import retention as local_retention
from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from benchctl import localstack
from benchctl.localstack import Stack
from core.errors import NotFound
from core.retention import DAY_S, RAW_ARTIFACTS, Retention, owned_regressions, runs_of_series
from functions import timers
from functions.context import Services
from tests.conftest import wait_until


def test_the_rules() -> None:
    rules = Retention(
        activity_ttl_s=60, agent_ttl_s=3600, live_ttl_s=120, raw_cool_days=1, raw_delete_days=2
    )
    assert rules.ttls() == {"activities": 60, "agents": 3600, "live": 120}
    assert rules.expired("live", written_s=0, now_s=121)
    assert not rules.expired("live", written_s=0, now_s=119)
    assert not rules.expired("activities", 1000, 1060) and rules.expired("activities", 1000, 1061)
    assert not rules.expired("runs", 0, 10**12)  # no TTL: kept while its owner is
    # Finished deliveries carry a ttl of their own; the rest of their container stays, and
    # a ttl on a document of a container without TTL means nothing (as in Cosmos DB).
    assert not rules.expired("conversations", 0, 10**12)
    assert not rules.expired("conversations", 1000, 1060, own_ttl=60)
    assert rules.expired("conversations", 1000, 1061, own_ttl=60)
    assert not rules.expired("conversations", 0, 10**12, own_ttl=-1)
    assert not rules.expired("runs", 0, 10**12, own_ttl=60)
    assert Retention(delivery_ttl_s=7 * DAY_S).finished_delivery_ttl() == 604_800
    t0 = 1_000_000.0
    assert rules.raw_action("raw", t0, t0 + DAY_S, None) is None
    assert rules.raw_action("logs", t0, t0 + DAY_S + 1, "Hot") == "cool"
    assert rules.raw_action("logs", t0, t0 + DAY_S + 1, "Cool") is None  # already cool
    assert rules.raw_action("raw", t0, t0 + 2 * DAY_S + 1, "Cool") == "delete"
    for kept in ("timeline", "counters", "series"):  # the figures' own artifacts
        assert kept not in RAW_ARTIFACTS
        assert rules.raw_action(kept, t0, t0 + 100 * DAY_S, None) is None
    with pytest.raises(ValueError):
        Retention(raw_cool_days=30, raw_delete_days=30)
    points = [{"run_id": "r-b"}, {"run_id": "r-a"}, {"run_id": "r-b"}]
    assert runs_of_series(points) == ["r-a", "r-b"]
    regs = [{"id": "x", "first_run_id": "r-a"}, {"id": "y", "first_run_id": "r-b"}]
    assert [r["id"] for r in owned_regressions(regs, "r-a")] == ["x"]


@pytest.mark.unit
def test_the_local_sweep_runs_as_often_as_the_shortest_rule_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sweep lists every raw artifact: under the default rules (a day and more) once a
    minute, not every 5 s (issue 29.2: 15 % of the API's time while 1,000 clients stored
    their results); under rules of seconds, every 5 s, as the test below needs."""
    swept: list[float] = []
    clock = [1_000_000.0]
    monkeypatch.setattr(timers, "time", SimpleNamespace(time=lambda: clock[0]))
    monkeypatch.setattr(timers, "_swept", [0.0])
    monkeypatch.setattr(local_retention, "sweep", lambda s, a, r, now: swept.append(now))
    for rules, every in ((Retention(), 60.0), (Retention(activity_ttl_s=2, agent_ttl_s=3), 5.0)):
        assert rules.sweep_every_s() == every
        parts = SimpleNamespace(
            store=None, artifacts=None, settings=SimpleNamespace(retention=rules)
        )
        swept.clear()
        start = clock[0] = clock[0] + 1000
        for _ in range(24):  # a tick every 5 s for 2 minutes
            timers.retention_tick(cast(Services, parts))
            clock[0] += 5
        assert [t - start for t in swept] == [every * k for k in range(int(120 // every))]


def test_the_local_timer_expires_what_cosmos_db_and_blob_lifecycle_would(
    stack: Stack, store: CosmosStore, artifacts: BlobArtifacts, tmp_path: Path
) -> None:
    """An API whose timer runs with short retention (2 s for replay guards, 3 s for agent
    records, raw artifacts cool after 2 s and go after 10 s; a finished delivery's own ttl
    of 2 s) on the session's servers. The documents and artifacts are written once it runs:
    its timer sweeps every 5 s, so one sweep falls between the artifacts' cooling and their
    deletion."""
    day = 1 / DAY_S
    api = dataclasses.replace(stack, dir=str(tmp_path), api_port=localstack.free_port(), procs=[])
    env = {
        "BENCH_ACTIVITY_TTL_S": "2",
        "BENCH_AGENT_TTL_S": "3",
        "BENCH_RAW_COOL_DAYS": str(2 * day),
        "BENCH_RAW_DELETE_DAYS": str(10 * day),
    }
    tag = uuid.uuid4().hex[:12]
    run_id, owner = f"r-{tag}{'0' * 20}", f"r-{tag}{'0' * 20}.s0.c0"
    activity = {"id": f"webhook:retention-{tag}"}
    agent: dict[str, object] = {"id": f"retention-{tag}", "pool": "default", "session": tag}
    agent.update(registered_ms=0, last_seen_ms=0)
    point = {"id": f"k-{tag}.{run_id}.s0", "series_key": f"k-{tag}", "run_id": run_id}
    # Teams run threads (core.chat.threads): one whose result was posted (a finished
    # delivery, with its ttl), one still open; and a series subscription. Only the first goes.
    finished_id, open_id, sub_id = f"run.{run_id}", f"run.{run_id}-open", f"sub.k-{tag}.0"
    thread = {"kind": "run", "run_id": run_id, "conversation": {}, "shown_state": "completed"}
    finished = {**thread, "id": finished_id, "announced": True, "ttl": 2}
    still_open = {**thread, "id": open_id, "announced": False}
    subscription = {"id": sub_id, "kind": "subscription", "series_key": f"k-{tag}"}

    def tiers() -> dict[str, str | None]:
        return {b.name: b.tier for b in artifacts.of_run(run_id)}

    proc = localstack.start_api(api, timer_seconds=0.5, extra_env=env)
    try:
        store.container("activities").create(activity)
        store.container("agents").create(agent)
        store.container("series").create(point)  # a series point: kept while its series is
        for doc in (finished, still_open, subscription):
            store.container("conversations").create(doc)
        for name in ("raw", "logs", "timeline"):
            artifacts.put(run_id, owner, name, name.encode())
        written = time.time()
        cooled = wait_until(
            lambda: (t := tiers()).get("raw") == "Cool" and t.get("logs") == "Cool" and t,
            timeout=20,
            what="raw artifacts in cool storage",
        )
        assert cooled["timeline"] in (None, "Hot")  # a figure's artifact is not raw
        wait_until(lambda: set(tiers()) == {"timeline"}, timeout=20, what="raw artifacts gone")
        gone_after = time.time() - written
    finally:
        localstack.stop_proc(proc)

    def absent(container: str, doc_id: str) -> bool:
        found = store.container(container).query(
            "SELECT c.id FROM c WHERE c.id = @i", [{"name": "@i", "value": doc_id}]
        )
        return not found

    try:
        assert absent("activities", activity["id"]) and absent("agents", str(agent["id"]))
        assert absent("conversations", finished_id)
        assert not absent("conversations", open_id) and not absent("conversations", sub_id)
        assert not absent("series", point["id"])
        assert artifacts.get(run_id, owner, "timeline") == b"timeline"
        assert gone_after >= 10  # not before their time
    finally:
        # The session's API reads these containers whole (its series list, its Teams cards):
        # stand-ins for a series point and threads of a run that does not exist go.
        for container, doc_id, pk in (
            ("series", point["id"], point["series_key"]),
            ("conversations", open_id, open_id),
            ("conversations", sub_id, sub_id),
        ):
            with contextlib.suppress(NotFound):
                store.container(container).delete(doc_id, pk)
