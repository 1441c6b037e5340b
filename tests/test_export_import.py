"""Backup and restore between deployments: ``benchctl export-all`` from one local deployment
and ``import-all`` into another (its own Azurite and Cosmos DB server) moves its runs, series,
regressions and schedules with every figure the same, read back through the API; and an admin
deleting a run or a series removes everything it owns, nothing else (issue 31.3, 31.4)."""

from __future__ import annotations

import json
import signal
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.blob import BlobArtifacts
from adapters.config import Settings
from adapters.cosmos import CosmosStore
from adapters.cosmos.base import Param
from benchctl import cli, localstack
from benchctl.localstack import Stack
from core.models.regression import MeanStd, MedianSd, Regression
from tests.conftest import FUZZ_POOL, run_body, wait_state
from tests.second_api import SecondApi

QUERIES = {
    field: f"SELECT c.id FROM c WHERE c.{field} = @r"  # noqa: S608 (fixed field names)
    for field in ("id", "run_id", "first_run_id")
}
# The deployments' agents run fio (the runs exported are measured); no figure is held to a
# known load, so the second fio lane runs them (tests/lanes.py).
pytestmark = [pytest.mark.fio, pytest.mark.fio_beside]
ADMIN_KEY, ENGINEER_KEY = "admin-key-" + "a" * 16, "engineer-key-" + "e" * 16


@dataclass
class Deployments:
    source: str  # API URLs
    dest: str
    dest_stack: Stack
    runs: list[str]  # finished runs in the source, oldest first
    unfinished: str
    series_key: str
    schedule: str
    export: Path


def benchctl(*argv: str) -> int:
    return cli.main(list(argv))


@pytest.fixture(scope="module")
def deployments(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployments]:
    """The source: the session's emulators with a database of its own, and two agents; the
    destination: a stack of its own (Azurite, Cosmos DB server, API with API keys)."""
    tmp = tmp_path_factory.mktemp("export")
    pool = "t120"  # the last per-test pool: no other test takes it
    database = f"src-{uuid.uuid4().hex[:8]}"
    src_env = {**stack.env(), "BENCH_COSMOS_DATABASE": database}
    CosmosStore.from_settings(Settings.from_env(src_env)).ensure_containers()
    source = SecondApi(stack, tmp / "source", env={"BENCH_COSMOS_DATABASE": database}).start()
    dest = Stack(
        dir=str(tmp / "dest"),
        queue_port=localstack.free_port(),
        cosmos_port=localstack.free_port(),
        api_port=localstack.free_port(),
        blob_port=localstack.free_port(),
    )
    agents = []
    keys = f"root:admin:{ADMIN_KEY},eng:engineer:{ENGINEER_KEY}"

    def start_dest() -> None:
        localstack.start_emulators(dest)
        localstack.start_api(dest, timer_seconds=0, extra_env={"BENCH_API_KEYS": keys})

    starting = ThreadPoolExecutor(1)
    dest_up = starting.submit(start_dest)  # meanwhile, the source's runs
    try:
        scratch = tmp / "scratch"
        scratch.mkdir()
        for i in (1, 2):
            agents.append(
                localstack.start_agent(
                    source.stack, f"{pool}-export-{i}", pool=pool, targets={"scratch": str(scratch)}
                )
            )
        with httpx.Client(base_url=source.url, timeout=30) as api:
            body = {**run_body(pool), "clients": 2}
            first = api.post("/api/runs", json=body).json()["id"]
            wait_state(api, first, ("completed",))
            # The same benchmark again (one series of two points), and a run waiting behind
            # it for the target, cancelled there: it never ran.
            second = api.post("/api/runs", json=body).json()["id"]
            cancelled = api.post("/api/runs", json=body).json()["id"]
            assert api.delete(f"/api/runs/{cancelled}").json()["state"] == "cancelled"
            wait_state(api, second, ("completed",))
            runs = [first, second, cancelled]
            # A run still going (no agent on its pool) is not moved.
            unfinished = api.post("/api/runs", json=run_body(FUZZ_POOL) | {"target": "fuzz"})
            series_key = api.get("/api/series").json()["series"][0]["series_key"]
            schedule = api.post(
                "/api/schedules",
                json={"cron": "0 3 * * *", "owner": "ops", "name": "nightly", "request": body},
            ).json()["id"]
        dest_up.result()
        # A regression first seen on the second run, triaged.
        src_store = CosmosStore.from_settings(Settings.from_env(src_env))
        src_store.series.create_regression(
            Regression(
                id=f"{series_key}.read.iops.gate.{runs[1]}",
                series_key=series_key,
                target="scratch",
                state="acknowledged",
                kind="regression",
                metric="read.iops",
                method="gate",
                before=MedianSd(median=100.0, sd=1.0),
                after=MeanStd(mean=87.5, std=0.0),
                first_run_id=runs[1],
                first_time_ms=0,
                change_pct=-12.5,
            )
        )
        yield Deployments(
            source.url,
            dest.api_url,
            dest,
            runs,
            unfinished.json()["id"],
            series_key,
            schedule,
            tmp / "bench.tar.gz",
        )
    finally:
        starting.shutdown(wait=True)
        for p in agents:
            localstack.stop_proc(p, signal.SIGKILL, timeout=5)
        source.stop()
        localstack.down(Path(dest.dir))


def views(url: str, d: Deployments, key: str | None = None) -> dict[str, Any]:
    """Everything the API shows of the moved data: each run, each client's full result
    (with its per-second series and fio's own JSON), curves, the series, regressions and
    schedules."""
    headers = {"X-Api-Key": key} if key else {}
    out: dict[str, Any] = {}
    with httpx.Client(base_url=url, timeout=30, headers=headers) as api:

        def get(path: str) -> Any:
            r = api.get(path)
            assert r.status_code == 200, (path, r.text)
            return r.json()

        for run_id in d.runs:
            run = out[run_id] = get(f"/api/runs/{run_id}")
            out[f"{run_id}/curves"] = get(f"/api/runs/{run_id}/curves")
            for item in run["items"]:
                if item.get("result"):
                    out[item["id"]] = get(f"/api/runs/{run_id}/results/{item['id']}")
        out["series"] = get(f"/api/series/{d.series_key}")
        out["regressions"] = get("/api/regressions")
        out["schedule"] = get(f"/api/schedules/{d.schedule}")
    return out


def test_export_all_then_import_all_moves_every_figure(
    deployments: Deployments, capsys: pytest.CaptureFixture[str]
) -> None:
    d = deployments
    assert benchctl("--api-url", d.source, "export-all", "-o", str(d.export)) == 0
    said = capsys.readouterr().err
    assert "exported 3 runs" in said and "1 schedules" in said
    assert "left out 1 runs still going" in said
    assert (
        benchctl("--api-url", d.dest, "--api-key", ENGINEER_KEY, "import-all", str(d.export)) == 2
    )
    assert "(caller)" in capsys.readouterr().err  # an engineer may not: admins only

    assert benchctl("--api-url", d.dest, "--api-key", ADMIN_KEY, "import-all", str(d.export)) == 0
    assert "documents created, 0 already there" in capsys.readouterr().err
    before, after = views(d.source, d), views(d.dest, d, ADMIN_KEY)
    assert before.keys() == after.keys()
    for key in before:
        assert after[key] == before[key], key
    # The figures themselves are there (not two empty answers alike).
    first = before[d.runs[0]]
    assert first["state"] == "completed" and first["aggregate"]["read"]["iops"] > 0
    results = [v for k, v in before.items() if k.startswith(tuple(d.runs[:2])) and ".s0.c" in k]
    assert len(results) == 4 and all(r["raw"]["jobs"] and r["series"]["read"] for r in results)
    assert len(before["series"]["history"]) == 2
    assert before["regressions"]["regressions"][0]["state"] == "acknowledged"
    # Per-second CSV, read back from the moved timelines.
    for url, api_key in ((d.source, ""), (d.dest, ADMIN_KEY)):
        out = d.export.parent / f"{url.rsplit(':', 1)[1]}.csv"
        args = ["--api-url", url, *(["--api-key", api_key] if api_key else [])]
        assert benchctl(*args, "export", d.runs[0], "-o", str(out)) == 0
    csvs = sorted(d.export.parent.glob("*.csv"))
    assert len(csvs) == 2 and csvs[0].read_text() == csvs[1].read_text()
    assert len(csvs[0].read_text().splitlines()) > 2

    # Again: nothing is created twice.
    assert benchctl("--api-url", d.dest, "--api-key", ADMIN_KEY, "import-all", str(d.export)) == 0
    assert " 0 documents created" in capsys.readouterr().err
    with httpx.Client(base_url=d.dest, headers={"X-Api-Key": ADMIN_KEY}) as api:
        assert api.get(f"/api/runs/{d.unfinished}").status_code == 404


def test_an_admin_deleting_a_run_or_a_series_removes_all_it_owns(
    deployments: Deployments, capsys: pytest.CaptureFixture[str]
) -> None:
    d = deployments
    first, second, cancelled = d.runs
    settings = d.dest_stack.settings()
    store = CosmosStore.from_settings(settings)
    blobs = BlobArtifacts.connect(settings.blob_uri, local_emulators=True)
    if not store.container("runs").query("SELECT c.id FROM c", []):
        benchctl("--api-url", d.dest, "--api-key", ADMIN_KEY, "import-all", str(d.export))

    def owned(run_id: str) -> dict[str, int]:
        where: list[Param] = [{"name": "@r", "value": run_id}]
        counts = {
            name: len(store.container(name).query(QUERIES[field], where))
            for name, field in (
                ("runs", "id"),
                ("items", "run_id"),
                ("results", "run_id"),
                ("aggregates", "run_id"),
                ("series", "run_id"),
                ("regressions", "first_run_id"),
                ("conversations", "run_id"),
            )
        }
        counts["artifacts"] = len(blobs.of_run(run_id))
        return counts

    # The Teams thread the run was asked from (core.chat.threads), its result posted; and a
    # conversation's subscription to the series, which is the conversation's, not the run's.
    thread: dict[str, Any] = {"id": f"run.{first}", "kind": "run", "run_id": first}
    thread |= {"conversation": {}, "shown_state": "completed", "announced": True, "ttl": 604800}
    store.container("conversations").upsert(thread)
    sub_id = f"sub.{d.series_key}.0"
    subscription = {"id": sub_id, "kind": "subscription", "series_key": d.series_key}
    store.container("conversations").upsert(subscription)
    a, b = owned(first), owned(second)
    assert a["results"] == 2 and a["series"] == 1 and a["artifacts"] >= 6 and b["regressions"] == 1
    assert a["conversations"] == 1
    with httpx.Client(base_url=d.dest, headers={"X-Api-Key": ENGINEER_KEY}) as eng:
        refused = eng.delete(f"/api/admin/runs/{first}")
        assert refused.status_code == 403 and refused.json()["errors"][0]["field"] == "(caller)"
    with httpx.Client(base_url=d.source) as src:  # a run still going cannot be deleted
        busy = src.delete(f"/api/admin/runs/{d.unfinished}")
        assert busy.status_code == 409 and "cancel it first" in busy.text

    assert benchctl("--api-url", d.dest, "--api-key", ADMIN_KEY, "purge", first) == 0
    said = capsys.readouterr().out
    assert said.startswith("removed ") and f"{a['results']} results" in said
    assert owned(first) == dict.fromkeys(a, 0)
    assert owned(second) == b  # the other run of its series is untouched
    with httpx.Client(base_url=d.dest, headers={"X-Api-Key": ADMIN_KEY}) as api:
        assert api.get(f"/api/runs/{first}").status_code == 404
        history = api.get(f"/api/series/{d.series_key}").json()["history"]
        assert [p["run_id"] for p in history] == [second]

        assert (
            benchctl("--api-url", d.dest, "--api-key", ADMIN_KEY, "purge", "--series", d.series_key)
            == 0
        )
        assert owned(second) == dict.fromkeys(b, 0)
        assert api.get(f"/api/series/{d.series_key}").status_code == 404
        assert api.get("/api/regressions").json()["regressions"] == []
        # What the series did not own stays: the cancelled run, the schedule.
        assert api.get(f"/api/runs/{cancelled}").json()["state"] == "cancelled"
        assert api.get(f"/api/schedules/{d.schedule}").status_code == 200
        assert api.delete(f"/api/admin/series/{d.series_key}").status_code == 404
    assert store.container("conversations").read(sub_id, sub_id)  # the conversation's
    assert json.loads(json.dumps(owned(cancelled)))["runs"] == 1
