"""Runners act on what is theirs, engineers and admins on anyone's (issue 12.4): cancelling
runs (``requested_by.name``), changing schedules (``owner``) and triaging regressions
(first seen on a run: ``first_run_id``). Each refusal is a 403 naming the field and changes
nothing. A second API process requiring keys, on the session's emulators."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from adapters.cosmos import CosmosStore
from benchctl.localstack import Stack
from core.models.regression import MeanStd, MedianSd, Regression
from tests.conftest import run_body
from tests.second_api import SecondApi

KEYS = {
    "root": ("admin", "admin-owner-key-01234567"),
    "ops": ("engineer", "engineer-owner-key-0123"),
    "ana": ("runner", "runner-ana-key-012345678"),
    "bo": ("runner", "runner-bo-key-0123456789"),
    "eve": ("reader", "reader-eve-key-012345678"),
}


@pytest.fixture(scope="module")
def owned(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecondApi]:
    env = {"BENCH_API_KEYS": ",".join(f"{n}:{r}:{k}" for n, (r, k) in KEYS.items())}
    second = SecondApi(stack, tmp_path_factory.mktemp("owned-api"), env).start()
    yield second
    second.stop()


def as_(second: SecondApi, name: str) -> httpx.Client:
    return httpx.Client(base_url=second.url, timeout=30, headers={"X-Api-Key": KEYS[name][1]})


def refused(r: httpx.Response, field: str) -> str:
    assert r.status_code == 403, (r.status_code, r.text)
    [error] = r.json()["errors"]
    assert error["field"] == field, error
    return str(error["message"])


def test_runners_cancel_only_their_own_runs(owned: SecondApi, pool: str) -> None:
    with as_(owned, "root") as root, as_(owned, "ana") as ana, as_(owned, "ops") as ops:
        admins = root.post("/api/runs", json=run_body(pool)).json()["id"]
        anas = ana.post("/api/runs", json=run_body(pool)).json()["id"]

        message = refused(ana.delete(f"/api/runs/{admins}"), "requested_by.name")
        assert message == f"role runner may change only its own; run {admins} belongs to root"
        assert root.get(f"/api/runs/{admins}").json()["cancel_requested"] is False
        with as_(owned, "bo") as bo:
            refused(bo.delete(f"/api/runs/{anas}"), "requested_by.name")
        with as_(owned, "eve") as eve:
            assert eve.delete(f"/api/runs/{anas}").status_code == 403

        assert ana.delete(f"/api/runs/{anas}").json()["state"] == "cancelled"  # its own
        assert ops.delete(f"/api/runs/{admins}").json()["state"] == "cancelled"  # anyone's


def test_runners_change_only_their_own_schedules_and_only_on_or_off(
    owned: SecondApi, pool: str
) -> None:
    # Once a year (1 January, 03:00 UTC), so the session's timer does not fire them.
    template = {"cron": "0 3 1 1 *", "request": run_body(pool), "name": "nightly"}
    with as_(owned, "ops") as ops, as_(owned, "ana") as ana:
        mine = ops.post("/api/schedules", json={**template, "owner": "ana"}).json()["id"]
        roots = ops.post("/api/schedules", json={**template, "owner": "root"}).json()["id"]

        off = ana.patch(f"/api/schedules/{mine}", json={"enabled": False})
        assert off.status_code == 200 and off.json()["enabled"] is False
        # Its runs start as an engineer: a runner may not rewrite what or when they run.
        bigger = {"request": {**run_body(pool), "clients": 24}}
        refused(ana.patch(f"/api/schedules/{mine}", json=bigger), "request")
        refused(ana.patch(f"/api/schedules/{mine}", json={"cron": "* * * * *"}), "cron")
        assert ops.get(f"/api/schedules/{mine}").json()["cron"] == "0 3 1 1 *"

        refused(ana.patch(f"/api/schedules/{roots}", json={"enabled": False}), "owner")
        refused(ana.delete(f"/api/schedules/{roots}"), "owner")
        with as_(owned, "bo") as bo:
            refused(bo.delete(f"/api/schedules/{mine}"), "owner")
        assert ops.get(f"/api/schedules/{roots}").json()["enabled"] is True

        assert ana.delete(f"/api/schedules/{mine}").status_code == 204
        assert ops.patch(f"/api/schedules/{roots}", json={"enabled": False}).status_code == 200
        assert ops.delete(f"/api/schedules/{roots}").status_code == 204


def test_runners_triage_only_regressions_first_seen_on_their_runs(
    owned: SecondApi, store: CosmosStore, pool: str
) -> None:
    with as_(owned, "root") as root, as_(owned, "ana") as ana, as_(owned, "ops") as ops:
        runs = {
            "root": root.post("/api/runs", json=run_body(pool)).json()["id"],
            "ana": ana.post("/api/runs", json=run_body(pool)).json()["id"],
        }
        key = f"ownership-test-{pool}"
        for run_id in runs.values():
            store.series.create_regression(
                Regression(
                    id=f"{key}.read.iops.gate.{run_id}",
                    series_key=key,
                    state="new",
                    kind="regression",
                    metric="read.iops",
                    method="gate",
                    before=MedianSd(median=100.0, sd=1.0),
                    after=MeanStd(mean=80.0, std=0.0),
                    first_run_id=run_id,
                    first_time_ms=0,
                )
            )
        ids = {who: f"{key}.read.iops.gate.{run_id}" for who, run_id in runs.items()}
        url = f"/api/regressions/{key}"

        message = refused(
            ana.patch(f"{url}/{ids['root']}", json={"state": "acknowledged"}), "first_run_id"
        )
        assert "belongs to root" in message
        assert store.series.get_regression(key, ids["root"]).state == "new"
        with as_(owned, "bo") as bo:
            refused(bo.patch(f"{url}/{ids['ana']}", json={"state": "fixed"}), "first_run_id")

        mine = ana.patch(f"{url}/{ids['ana']}", json={"state": "acknowledged"})
        assert mine.status_code == 200 and mine.json()["state"] == "acknowledged"
        theirs = ops.patch(f"{url}/{ids['root']}", json={"state": "expected"})
        assert theirs.status_code == 200 and theirs.json()["state"] == "expected"
        for run_id in runs.values():
            ops.delete(f"/api/runs/{run_id}")
