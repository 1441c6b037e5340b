"""Metadata phases (create, stat, delete) through the API, the queue, real agents and real
fio's file engines, with every figure checked against fio's own output; the job files, the
checks that make a phase a measurement, and the refusals (pure)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from agent import metadata as agent_metadata
from agent.layout import ItemFailed
from core.analysis.concurrency import outstanding_ios
from core.analysis.series import infra_facts, infra_fingerprint, segments
from core.artifacts import unpack_json
from core.engines.fio_check import measurement_problems
from core.engines.fio_metadata import metadata_job_file, tree_files
from core.engines.fio_output import percentile_from_bins
from core.errors import Forbidden
from core.limits.facts import run_target_facts
from core.models import Metadata, RunRequest, Workload
from core.models.aggregate import StepAggregate
from core.models.result import HostFacts, MountFacts
from core.models.series import StepPoint
from core.models.state import RunState
from core.models.target_facts import RunTargetFacts
from core.models.views import RunView, StepView
from core.monitoring.monitor import Monitor
from core.runs.guardrails import ROLES, Caller, TargetInfo, check_run
from core.runs.plan import plan_steps
from tests.conftest import AgentFactory, wait_state
from tests.documents import stored_aggregate

META = {"ops": ["create", "stat", "delete"], "files_per_dir": 300, "dir_depth": 3}


def test_metadata_phases_measured_by_real_fio_through_the_stack(
    api: httpx.Client,
    store: CosmosStore,
    artifacts: BlobArtifacts,
    agents: AgentFactory,
    pool: str,
    scratch: Path,
) -> None:
    agents()
    agents()
    # 2 clients x 2 jobs x 300 files; a cap of 400 operations/s per client (200 per job)
    # stretches create and delete over 1.5 s, so they have per-second logs too: a known load.
    body = {
        "target": "scratch",
        "pool": pool,
        "clients": 2,
        "workload": {"numjobs": 2, "runtime": 2, "rate_iops": 400, "metadata": META},
    }
    r = api.post("/api/runs", json=body)
    assert r.status_code == 202, r.text
    run = wait_state(api, r.json()["id"], ("completed", "failed"), timeout=120)
    assert run["state"] == "completed", run
    steps = run["steps"]
    assert [s["point"] for s in steps] == ["create", "stat", "delete"]
    direction = {"create": "write", "stat": "read", "delete": "write"}
    for step in steps:
        op, agg = step["point"], step["aggregate"]
        d = direction[op]
        other = "read" if d == "write" else "write"
        assert agg[d] and not agg.get(other), (op, agg)
        items = [i for i in run["items"] if i["step"] == step["step"]]
        assert len(items) == 2
        fio_ios, fio_bins = 0, {}  # type: ignore[var-annotated]
        for item in items:
            doc = store.results.get(run["id"], item["id"]).model_dump(mode="json")
            raw = unpack_json(artifacts.get(run["id"], item["id"], "raw"))
            job = raw["jobs"][0]
            assert (
                raw["global options"]["ioengine"]
                == {
                    "create": "filecreate",
                    "stat": "filestat",
                    "delete": "filedelete",
                }[op]
            )
            # fio's own figures, one operation per I/O of the phase's direction.
            assert doc[d]["total_ios"] == job[d]["total_ios"] > 0
            assert doc[d]["iops"] == pytest.approx(job[d]["iops"])
            assert doc[d]["clat_ns"]["mean"] == pytest.approx(job[d]["clat_ns"]["mean"])
            assert doc[d]["lat_ns"] == doc[d]["clat_ns"]  # the whole call, fio's clat
            assert doc[d]["io_bytes"] == 0 and doc[d]["bw_bytes"] == 0
            p99 = percentile_from_bins(job[d]["clat_ns"]["bins"], 99)
            assert doc[d]["clat_percentiles_ns"]["99.000000"] == p99
            assert job[d]["clat_ns"]["percentile"]["99.000000"] == p99
            if op != "stat":  # each of the client's 600 files exactly once
                assert job[d]["total_ios"] == 2 * 300
            fio_ios += job[d]["total_ios"]
            for k, v in job[d]["clat_ns"]["bins"].items():
                fio_bins[k] = fio_bins.get(k, 0) + v
        assert agg[d]["total_ios"] == fio_ios
        # The common window holds the phase's operations at the capped rate: 2 x 400/s.
        assert agg[d]["iops"] == pytest.approx(800, rel=0.15), (op, agg[d])
        assert agg["littles_law"]["mode"] == "rate-cap"
        assert agg["littles_law"]["cap_iops"] == 800
        if agg[d]["percentiles_basis"] == "whole-run":
            assert agg[d]["clat_ns"]["p99"] == percentile_from_bins(fio_bins, 99)
    # The delete phase removed the files and the tree; nothing is left of the run.
    assert not any((scratch / ".benchsvc").rglob("f*"))
    assert not (scratch / ".benchsvc" / f"md-{run['id']}").exists()


def test_littles_law_uses_the_operations_kept_in_flight(
    api: httpx.Client, store: CosmosStore, agents: AgentFactory, pool: str
) -> None:
    """Uncapped, 1 client x 3 jobs: each phase's Little's law is judged against the 3
    operations the jobs keep in flight, from the operations' own latency."""
    agents()
    md = {"ops": ["create", "open", "delete"], "files_per_dir": 200, "dir_depth": 1}
    workload = {"numjobs": 3, "runtime": 2, "metadata": md}
    body = {"target": "scratch", "pool": pool, "workload": workload}
    run = wait_state(api, api.post("/api/runs", json=body).json()["id"], ("completed", "failed"))
    assert run["state"] == "completed", run
    for step in run["steps"]:
        agg = step["aggregate"]
        d = "read" if step["point"] == "open" else "write"
        law = agg["littles_law"]
        assert law["mode"] == "outstanding" and law["outstanding_ios"] == 3
        assert law["implied_ios"] == pytest.approx(agg[d]["iops"] * agg[d]["lat_mean_ns"] / 1e9)
        (item,) = [i for i in run["items"] if i["step"] == step["step"]]
        doc = store.results.get(run["id"], item["id"]).model_dump(mode="json")
        # fio's own time for the phase: a create of 600 files ends long before its cap.
        assert doc["ended_at_ms"] - doc["started_at_ms"] <= doc[d]["runtime_ms"] + 1000
        if step["point"] != "open":
            assert doc[d]["total_ios"] == 600


def _w(op: str | None = None, **md: Any) -> Workload:
    return Workload(numjobs=2, runtime=2, metadata=Metadata(**{**META, **md, "op": op}))


@pytest.mark.fio
@pytest.mark.parametrize("op", ["create", "stat", "open", "delete"])
def test_metadata_job_is_valid_fio(op: str, tmp_path: Path) -> None:
    text = metadata_job_file(
        _w(op, ops=["create", "stat", "open", "delete"]),
        roots={"vdb1": str(tmp_path / "a"), "vdb2": str(tmp_path / "b")},
        log_prefix=str(tmp_path / "log"),
        start_fifo=str(tmp_path / "start.fifo"),
    )
    (tmp_path / "j.fio").write_text(text)
    r = subprocess.run(["fio", "--parse-only", str(tmp_path / "j.fio")], capture_output=True)
    assert r.returncode == 0, r.stderr
    assert f"directory={tmp_path}/a/d1/d2" in text  # depth 3: d1/d2/j<job>/f<n>
    assert ("time_based=1" in text) == (op in ("stat", "open"))


def test_tree_shape() -> None:
    files = tree_files("/m/root", Metadata(files_per_dir=2, dir_depth=2), numjobs=2)
    assert files == ["/m/root/d1/j0/f0", "/m/root/d1/j0/f1", "/m/root/d1/j1/f0", "/m/root/d1/j1/f1"]


def test_littles_law_counts_one_operation_per_job() -> None:
    # Synchronous file engines: iodepth does not add operations in flight.
    w = Workload(numjobs=8, iodepth=16, metadata=Metadata())
    assert outstanding_ios("fio", w, mounts=3) == 24


def _fio_doc(op_dir: str, ios: int, bins: dict[str, int], runtime_ms: int = 2000) -> dict[str, Any]:
    live = {
        "total_ios": ios,
        "runtime": runtime_ms,
        "clat_ns": {"mean": 5000.0, "percentile": {"50.000000": 4000}, "bins": bins},
        "lat_ns": {"mean": 0.0},
    }
    empty = {"total_ios": 0, "runtime": 0, "clat_ns": {"mean": 0.0}, "lat_ns": {"mean": 0.0}}
    other = "read" if op_dir == "write" else "write"
    return {"jobs": [{"jobname": "scratch", "error": 0, op_dir: live, other: empty}]}


def test_a_phase_is_a_measurement_only_when_complete() -> None:
    create = _w("create")  # 2 jobs x 300 files
    assert measurement_problems(_fio_doc("write", 600, {"4000": 600}), create) == []
    short = measurement_problems(_fio_doc("write", 450, {"4000": 450}), create)
    assert short and "450 create operations of the 600 files" in short[0]
    assert measurement_problems(_fio_doc("write", 1200, {"4000": 1200}), create, mounts=2) == []
    lost = measurement_problems(_fio_doc("write", 600, {"4000": 500}), create)
    assert lost == ["fio's latency bins hold 500 samples for 600 creates"]
    stat = _w("stat")
    assert measurement_problems(_fio_doc("read", 9000, {"2000": 9000}), stat) == []
    assert measurement_problems(_fio_doc("read", 9000, {"2000": 9000}, 500), stat)


def _check(role: str, body: dict[str, Any], targets: list[TargetInfo] | None = None) -> None:
    request = RunRequest.model_validate(body)
    assert request.workload is not None
    steps = plan_steps(request, request.workload)
    check_run(request, steps, request.workload, False, Caller("t", role), targets or [])


def test_tree_size_is_capped_by_role() -> None:
    ten_million = {
        "target": "scratch",
        "workload": {"numjobs": 10, "metadata": {"files_per_dir": 1_000_000}},
    }
    with pytest.raises(Forbidden) as e:
        _check("runner", ten_million)
    (err,) = e.value.errors
    assert err.field == "workload.metadata.files_per_dir" and "10,000,000 files" in err.message
    many_jobs = {
        "target": "scratch",
        "workload": {"numjobs": 200, "metadata": {"files_per_dir": 1000}},
    }
    with pytest.raises(Forbidden) as e:
        _check("runner", many_jobs)
    assert e.value.errors[0].field == "workload.numjobs"
    _check("engineer", many_jobs)  # 200,000 files per client
    small = {"target": "scratch", "workload": {"numjobs": 8, "metadata": {"files_per_dir": 1000}}}
    _check("runner", small)  # a runner may create its own small tree, within the cap
    assert ROLES["runner"].max_files < 10_000_000


def test_metadata_on_a_read_only_target_is_refused() -> None:
    body = {"target": "golden", "workload": {"metadata": {"files_per_dir": 10}}}
    with pytest.raises(Forbidden) as e:
        _check("admin", body, [TargetInfo(alias="golden", read_only=True)])
    assert [x.field for x in e.value.errors] == ["workload.metadata"]
    assert "read-only" in e.value.errors[0].message


def test_metadata_refused_over_the_api_naming_the_field(api: httpx.Client, pool: str) -> None:
    for body, code, field in (
        (
            {"target": "golden", "pool": pool, "workload": {"metadata": {}}},
            403,
            "workload.metadata",
        ),
        (
            {"target": "scratch", "pool": pool, "engine": "diskspd", "workload": {"metadata": {}}},
            400,
            "engine",
        ),
        (
            {
                "target": "scratch",
                "pool": pool,
                "workload": {"metadata": {"ops": ["stat", "delete"]}},
            },
            400,
            "workload.metadata.ops",
        ),
        (
            {"target": "scratch", "pool": pool, "workload": {"ramp_time": 5, "metadata": {}}},
            400,
            "workload",
        ),
    ):
        r = api.post("/api/runs", json=body)
        assert r.status_code == code, (body, r.text)
        assert field in [e["field"] for e in r.json()["errors"]], r.text


def _target_facts(caching: bool | None) -> RunTargetFacts | None:
    facts: dict[str, Any] = {"kind": "azure-files-premium", "provisioned_gib": 1024}
    if caching is not None:
        facts["metadata_caching"] = caching
    return run_target_facts("default", ["share"], [TargetInfo(alias="share", facts=facts)])


def test_metadata_caching_fact_splits_the_series() -> None:
    host = HostFacts(
        hostname="h",
        kernel="6.1",
        os="linux",
        cpu_count=8,
        vm_size="Standard_D8s_v5",
        region="westeurope",
    )
    share = MountFacts(
        alias="share", path="/", mount_point="/mnt", fstype="cifs", source="//a/s", options="rw"
    )
    result = SimpleNamespace(host=host, mounts=[share])
    off, on = (infra_facts([result], _target_facts(v)) for v in (False, True))
    assert off.model_dump(mode="json")["targets"] == [["share", "metadata_caching", False]]
    assert infra_fingerprint(off) != infra_fingerprint(on)
    # Targets that declare no such switch keep the fingerprint they always had.
    assert infra_facts([result], _target_facts(None)) == infra_facts([result])
    points = [
        StepPoint(
            id=str(i),
            series_key="k",
            run_id=f"r{i}",
            step=0,
            target="share",
            time_ms=i,
            infra=infra_fingerprint(f),
            infra_facts=f,
            metrics={},
            clients=1,
            engine="fio",
        )
        for i, f in enumerate([off, off, on, on])
    ]
    assert [len(s) for s in segments(points)] == [2, 2]


def _phase_agg(step: int, op: str, iops: float, mean_ns: float) -> StepAggregate:
    d = "read" if op in ("stat", "open") else "write"
    md = {**META, "ops": ["create", "open", "delete"], "op": op}
    figures: dict[str, Any] = {
        "iops": iops,
        "bw_bytes": 0.0,
        "lat_mean_ns": mean_ns,
        "clat_ns": {"p50": mean_ns, "p99": 3 * mean_ns, "p99.9": 3 * mean_ns},
    }
    workload = Workload(metadata=Metadata(**md)).model_dump(mode="json")
    sides: dict[str, Any] = {d: figures}
    return stored_aggregate(step=step, point=op, workload=workload, **sides)


def test_compare_of_caching_off_and_on_shows_each_operation(store: CosmosStore) -> None:
    def run(rid: str, gain: float) -> RunView:
        aggs = [
            _phase_agg(i, op, 1000 * gain, 4e6 / gain)
            for i, op in enumerate(("create", "open", "delete"))
        ]
        # Only what a comparison reads (model_construct: the rest of a view is not needed).
        steps: list[dict[str, Any]] = [{"step": a.step, "aggregate": a} for a in aggs]
        run: dict[str, Any] = {
            "id": rid, "state": RunState.COMPLETED, "target": "share", "targets": ["share"],
            "engine": "fio", "profile": None, "created_at": "2031-01-01T00:00:00Z",
            "tags": {}, "comparison_key": "k", "aggregate": aggs[-1],
            "steps": [StepView.model_construct(**s) for s in steps],
        }  # fmt: skip
        return RunView.model_construct(**run)

    off, on = run("r-" + "0" * 32, 1.0), run("r-" + "1" * 32, 1.6)
    rows = {r.metric: r.model_dump() for r in Monitor(store).compare(off, on).rows}
    assert set(rows) == {f"{op}.{m}" for op in ("create", "open", "delete")
                         for m in ("iops", "lat.mean", "lat.p50", "lat.p99")}  # fmt: skip
    assert rows["create.iops"]["delta_pct"] == pytest.approx(60)
    assert rows["open.lat.mean"]["delta_pct"] == pytest.approx(-37.5)
    assert rows["delete.lat.p99"]["a"] == 12e6
    assert rows["delete.lat.p99"]["b"] == pytest.approx(7.5e6)


def test_agent_makes_checks_fills_and_removes_the_tree(tmp_path: Path) -> None:
    roots = {"scratch": tmp_path / ".benchsvc" / "md-r" / "c0"}
    md = Metadata(files_per_dir=3, dir_depth=2, file_size=512)
    create = Workload(numjobs=2, metadata=md.model_copy(update={"op": "create"}))
    agent_metadata.prepare(create, roots)
    assert sorted(p.name for p in (roots["scratch"] / "d1").iterdir()) == ["j0", "j1"]
    stat = Workload(numjobs=2, metadata=md.model_copy(update={"op": "stat"}))
    with pytest.raises(ItemFailed) as e:
        agent_metadata.prepare(stat, roots)  # fio has not created the files yet
    assert e.value.permanent and "d1/j0/f0 is missing" in str(e.value)
    files = tree_files(str(roots["scratch"]), md, 2)
    for f in files:
        Path(f).touch()  # what fio's filecreate leaves: empty files
    agent_metadata.finish(create, roots)
    assert {Path(f).stat().st_size for f in files} == {512}
    agent_metadata.prepare(stat, roots)
    delete = Workload(numjobs=2, metadata=md.model_copy(update={"op": "delete"}))
    with pytest.raises(ItemFailed, match="left 6 files"):
        agent_metadata.finish(delete, roots)  # fio deleted nothing: said, tree removed
    assert not (tmp_path / ".benchsvc" / "md-r").exists()


@given(
    files_per_dir=st.integers(1, 50),
    depth=st.integers(1, 5),
    numjobs=st.integers(1, 8),
    mounts=st.integers(1, 3),
    done=st.integers(0, 3000),
)
def test_a_counted_phase_is_valid_exactly_when_every_file_is_done(
    files_per_dir: int, depth: int, numjobs: int, mounts: int, done: int
) -> None:
    md = Metadata(files_per_dir=files_per_dir, dir_depth=depth, op="delete")
    files = tree_files("/m", md, numjobs)
    assert len(set(files)) == len(files) == files_per_dir * numjobs
    assert all(f.count("/") == depth + 2 for f in files)  # /m, d1.., j<job>, f<n>
    w = Workload(numjobs=numjobs, metadata=md)
    expected = files_per_dir * numjobs * mounts
    problems = measurement_problems(_fio_doc("write", done, {"9000": done}), w, mounts=mounts)
    assert (problems == []) == (done == expected)
