"""Read-only targets are never written, and roles bound the working set (issue 12, point 5):
the registry's data sets, the checks at submission, the work item, the fio job that reads
a data set, and fio itself refusing to write with the options the agent gives it."""

from __future__ import annotations

import base64
import json
import os
import posixpath
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agent.fio_runner import FioProcess
from core.catalogue import get_profile, resolve
from core.engines.fio_job import job_file
from core.errors import Forbidden
from core.models import DATASET_DIR_PATTERN, DataSet, RunRequest, WorkItem, Workload
from core.models.common import MAX_DATASET_FILES
from core.models.stored import Run, Step
from core.runs.guardrails import ROLES, Caller, TargetInfo, check_run, datasets_for, parse_targets
from core.runs.plan import plan_items, plan_steps
from core.runs.working_set import working_set
from tests.conftest import TmpfsFactory

MIB, GIB, TIB = 1 << 20, 1 << 30, 1 << 40
GOLDEN = DataSet(directory="bench-data", files=16, file_size="1g")
REGISTRY = [
    TargetInfo(alias="golden", read_only=True, dataset=GOLDEN),
    TargetInfo(alias="bare", read_only=True),  # read-only, no data set
    TargetInfo(alias="scratch"),
]


def errors_of(body: dict[str, Any], role: str = "admin") -> list[str]:
    """check_run's refusals, as the service calls it (the profile resolved first)."""
    req = RunRequest.model_validate(body)
    base = resolve(get_profile(req.profile) if req.profile else None, req.workload)
    try:
        check_run(req, plan_steps(req, base), base, bool(req.fill), Caller("x", role), REGISTRY)
    except Forbidden as e:
        return [f"{x.field}: {x.message}" for x in e.errors]
    return []


# ---- the registry ------------------------------------------------------------------------


def test_the_registry_names_a_data_set_for_a_read_only_target() -> None:
    [t] = parse_targets(
        '[{"alias": "golden", "read_only": true, "dataset": '
        '{"directory": "bench-data/v1", "files": 16, "file_size": "10g", '
        '"file_name": "data.{i}.0"}}]'
    )
    assert t.dataset is not None and t.dataset.file_size_bytes == 10 * GIB
    assert t.dataset.file_path(3) == "bench-data/v1/data.3.0"
    assert DataSet(directory="d", files=1, file_size="1m").file_path(0) == "d/data.0"


@pytest.mark.parametrize(
    "dataset",
    [
        {"directory": "/etc", "files": 1, "file_size": "1m"},  # absolute
        {"directory": "../other", "files": 1, "file_size": "1m"},  # leaves the mount
        {"directory": "a/../../b", "files": 1, "file_size": "1m"},
        {"directory": ".benchsvc", "files": 1, "file_size": "1m"},  # the agents' own files
        {"directory": "a:b", "files": 1, "file_size": "1m"},  # fio's list separator
        {"directory": "d", "files": 0, "file_size": "1m"},
        {"directory": "d", "files": MAX_DATASET_FILES + 1, "file_size": "1m"},
        {"directory": "d", "files": 1, "file_size": "17t"},
        {"directory": "d", "files": 1, "file_size": "512k"},
        {"directory": "d", "files": 1, "file_size": "1m", "file_name": "data"},  # no {i}
        {"directory": "d", "files": 1, "file_size": "1m", "file_name": "a/{i}"},
        {"directory": "d", "files": 1, "file_size": "1m", "file_name": "{i}{i}"},
        {"directory": "d", "files": 1, "file_size": "1m", "extra": 1},
    ],
)
def test_a_bad_data_set_is_refused_naming_the_field(dataset: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as refused:
        TargetInfo.model_validate({"alias": "golden", "read_only": True, "dataset": dataset})
    assert refused.value.errors()[0]["loc"][0] == "dataset"
    with pytest.raises(ValueError, match=r"BENCH_TARGETS\[0\]\.dataset\."):
        parse_targets(json.dumps([{"alias": "golden", "read_only": True, "dataset": dataset}]))


def test_a_data_set_belongs_to_a_read_only_target() -> None:
    with pytest.raises(ValueError, match="a dataset is for read-only targets"):
        parse_targets(
            '[{"alias": "t", "dataset": {"directory": "d", "files": 1, "file_size": "1m"}}]'
        )


@given(st.from_regex(DATASET_DIR_PATTERN, fullmatch=True))
def test_every_data_set_directory_stays_inside_its_mount(directory: str) -> None:
    resolved = posixpath.normpath(posixpath.join("/mnt/golden", directory))
    assert resolved.startswith("/mnt/golden/")


# ---- refused at submission ---------------------------------------------------------------


def test_a_read_only_target_without_a_data_set_is_refused() -> None:
    assert errors_of({"target": "bare"}) == [
        "target: target bare is read-only and its registry entry names no prepared data set "
        "(dataset): a run would lay out its files there"
    ]
    assert errors_of({"targets": ["scratch", "bare"]})[0].startswith("targets.1: target bare")
    assert errors_of({"target": "golden"}) == []
    assert errors_of({"target": "scratch"}) == []


def test_writes_and_fills_stay_refused_with_a_data_set() -> None:
    assert errors_of({"target": "golden", "workload": {"rw": "randwrite"}}) == [
        "target: target golden is read-only: this run writes (rw=randwrite); choose a read"
    ]
    assert errors_of({"target": "golden", "fill": True}) == [
        "target: target golden is read-only: this run fills the working set; choose a read"
    ]


def test_a_job_needing_more_or_larger_files_than_the_data_set_is_refused() -> None:
    assert errors_of({"target": "golden", "workload": {"size": "2g"}}) == [
        "workload.size: target golden's data set holds files of 1g; each job would read 2g of one"
    ]
    assert errors_of({"target": "golden", "workload": {"numjobs": 17}}) == [
        "workload.numjobs: target golden's data set holds 16 files; 17 jobs need one each"
    ]
    assert errors_of({"target": "golden", "workload": {"numjobs": 8}, "clients": 3}) == [
        "clients: target golden's data set holds 16 files; 3 clients x 8 jobs need 24 (each "
        "client reads its own)"
    ]
    assert errors_of({"target": "golden", "workload": {"numjobs": 8}, "clients": 2}) == []
    # every step of a sweep: its numjobs and its client counts
    swept = {"target": "golden", "sweep": {"field": "numjobs", "values": [1, 4, 32]}}
    assert [e.split(":")[0] for e in errors_of(swept)] == ["workload.numjobs"]
    assert errors_of({"target": "golden", "workload": {"numjobs": 4}, "clients": [1, 2, 4, 8]})[
        0
    ].startswith("clients: target golden's data set holds 16 files; 8 clients x 4 jobs")


def test_diskspd_is_refused_on_a_read_only_target() -> None:
    assert errors_of({"target": "golden", "engine": "diskspd"}) == [
        "engine: target golden is read-only: its data set is read with fio (DiskSpd lays out "
        "files of its own)"
    ]


# ---- roles bound the working set ---------------------------------------------------------


def test_the_working_set_counts_files_per_client() -> None:
    w = Workload(size="10g", numjobs=25)
    assert working_set("fio", w, mounts=6) == 6 * 25 * 10 * GIB  # ANF Vdbench, 6 volumes
    # DiskSpd's threads share each file: files per target x mounts, numjobs plays no part
    assert working_set("diskspd", w, mounts=2, files_per_target=10) == 2 * 10 * 10 * GIB


def test_each_role_caps_the_working_set_naming_the_field() -> None:
    runner = {"target": "scratch", "workload": {"size": "4g", "numjobs": 4}}
    assert errors_of(runner, "runner") == []  # 16 GiB: at the cap
    assert errors_of({**runner, "workload": {"size": "4g", "numjobs": 5}}, "runner") == [
        "workload.numjobs: the working set is 5 files x 4g = 20 GiB per client; role runner "
        "may use 16 GiB at most"
    ]
    assert errors_of({"target": "scratch", "workload": {"size": "17g"}}, "runner") == [
        "workload.size: the working set is 1 file x 17g = 17 GiB per client; role runner "
        "may use 16 GiB at most"
    ]
    # the run that filled a mount: 256 jobs x 16 TiB
    huge = {"target": "scratch", "workload": {"size": "16t", "numjobs": 256}}
    assert errors_of(huge, "admin") == [
        "workload.numjobs: the working set is 256 files x 16t = 4,096 TiB per client; role "
        "admin may use 64 TiB at most"
    ]
    assert errors_of(huge, "engineer")[0].startswith("workload.size: the working set is 256")
    # mounts multiply it
    six = {"targets": ["v1", "v2", "v3", "v4", "v5", "v6"], "workload": {"size": "2g"}}
    assert errors_of({**six, "workload": {"size": "2g", "numjobs": 2}}, "runner")[0].startswith(
        "workload.numjobs: the working set is 12 files x 2g = 24 GiB"
    )


def test_the_cap_applies_to_every_step_of_a_sweep() -> None:
    body = {"target": "scratch", "workload": {"size": "1g"}}
    swept = {**body, "sweep": {"field": "numjobs", "values": [1, 8, 32]}}
    assert errors_of(swept, "runner") == [
        "workload.numjobs: the working set is 32 files x 1g = 32 GiB per client (step "
        "numjobs=32); role runner may use 16 GiB at most"
    ]
    rate = {**body, "workload": {"size": "1g", "numjobs": 17}, "sweep": {"rate_pct": [50]}}
    assert errors_of(rate, "runner")[0].startswith("workload.numjobs: the working set is 17")


def test_every_catalogue_profile_fits_an_engineer_on_six_volumes() -> None:
    from core.catalogue import PROFILES

    six = [f"v{i}" for i in range(1, 7)]
    for p in PROFILES:
        for engine in p.engines:
            body = {"targets": six if engine == "fio" else six[:2], "profile": p.name}
            found = [e for e in errors_of({**body, "engine": engine}, "engineer") if "working" in e]
            assert found == [], (p.name, engine)
    assert errors_of({"target": "chat", "profile": "smoke-randread-4k"}, "runner") == []
    assert ROLES["runner"].max_working_set < ROLES["engineer"].max_working_set


# ---- the work item and the fio job -------------------------------------------------------


def test_the_data_set_travels_with_every_work_item() -> None:
    req = RunRequest.model_validate({"targets": ["scratch", "golden"], "clients": 2})
    run_id = "r-" + "a" * 32
    stored: dict[str, Any] = {
        "id": run_id,
        "created_at": "2031-01-01T00:00:00Z",
        "created_ms": 0,
        "pool": "default",
        "target": "scratch",
        "targets": req.all_targets,
        "engine": "fio",
        "request": req.model_dump(mode="json"),
        "workload": {},
        "comparison_key": "k",
        "step_count": 1,
        "items_total": 2,
        "requested_by": {"name": "t", "role": "admin"},
        "body_hash": "h",
        "datasets": {a: d.model_dump() for a, d in datasets_for(req, REGISTRY).items()},
    }
    step = Step(id=f"{run_id}.s0", run_id=run_id, step=0, clients=2)
    items = plan_items(Run.model_validate(stored), step, Workload())
    assert [i.datasets for i in items] == [{"golden": GOLDEN}, {"golden": GOLDEN}]
    # an older run document without the field: no data sets
    legacy = Run.model_validate({k: v for k, v in stored.items() if k != "datasets"})
    one = Step(id=f"{run_id}.s0", run_id=run_id, step=0, clients=1)
    assert plan_items(legacy, one, Workload())[0].datasets == {}
    with pytest.raises(ValidationError, match="not targets"):
        WorkItem.model_validate({**items[0].model_dump(), "targets": ["scratch"]})


def test_a_work_item_with_16_data_sets_stays_far_under_64_kib() -> None:
    aliases = [f"golden-{i:02d}-" + "x" * 20 for i in range(16)]
    biggest = DataSet(
        directory="/".join(["d" * 64] * 3),
        files=16384,
        file_size="16t",
        file_name="a" * 30 + "{i}" + "b" * 30,
    )
    item = WorkItem(
        run_id="r-" + "a" * 32,
        item_id="r-" + "a" * 32 + ".s0.c0",
        step=0,
        client=0,
        clients=1,
        pool="default",
        targets=aliases,
        engine="fio",
        workload=Workload(),
        datasets={a: biggest for a in aliases},
    )
    encoded = base64.b64encode(item.model_dump_json().encode())  # as the queue stores it
    assert len(encoded) < 16 * 1024


@pytest.mark.fio
def test_the_job_reads_exactly_the_data_set_files_and_fio_accepts_it(tmp_path: Path) -> None:
    w = Workload(rw="randread", numjobs=2, size="1m", rate_iops=400)
    files = {"golden": ["/mnt/g/bench-data/data.2", "/mnt/g/bench-data/data.3"]}
    job = job_file(
        w, directories={"scratch": str(tmp_path)}, log_prefix=str(tmp_path / "b"), read_files=files
    )
    text = job.split("\n")
    at = text.index("[golden.0]")
    assert text[at : at + 8] == [
        "[golden.0]",
        "numjobs=1",
        "filename=/mnt/g/bench-data/data.2",
        "allow_file_create=0",
        "[golden.1]",
        "numjobs=1",
        "filename=/mnt/g/bench-data/data.3",
        "allow_file_create=0",
    ]
    assert "rate_iops=100" in text  # 400 over 2 jobs on each of 2 mounts
    (tmp_path / "job.fio").write_text(job)
    parsed = subprocess.run(
        ["fio", "--parse-only", str(tmp_path / "job.fio")], capture_output=True, text=True
    )
    assert parsed.returncode == 0, parsed.stderr
    with pytest.raises(ValueError, match="1 files for 2 jobs"):
        job_file(w, directories={}, log_prefix="/tmp/b", read_files={"golden": ["/a"]})


# ---- fio itself refuses to write: the safety net under the agent's checks ----------------


def listing(root: Path) -> dict[str, tuple[int, int, int, int]]:
    """Every entry under ``root``: inode, size, mtime (ns), allocated blocks."""
    return {
        str(p.relative_to(root)): (s.st_ino, s.st_size, s.st_mtime_ns, s.st_blocks)
        for p in sorted(root.rglob("*"))
        for s in [p.lstat()]
    }


def run_fio(fio: FioProcess) -> tuple[int, str]:
    fio.start()
    fio.release()
    out = fio.collect()
    return out.returncode, out.notes + out.stderr


@pytest.mark.fio
@pytest.mark.parametrize(
    ("workload", "said"),
    [
        # a bug asking for a write: fio refuses the job before any I/O
        (Workload(rw="randwrite", size="4m", runtime=1), "read-only mode"),
        # a job longer than a file: without --readonly fio unlinks the file to lay it out
        # anew (filesetup.c, extend_file); with it, fio refuses the extend
        (Workload(rw="randread", size="8m", runtime=1), "refusing extend of file due to read-only"),
    ],
)
def test_fio_run_by_the_agent_never_writes_a_data_set(
    workload: Workload, said: str, tmp_path: Path, tmpfs: TmpfsFactory
) -> None:
    mount = tmpfs(tmp_path / "golden", size="16m")  # read-write: fio's own refusal is tested
    (mount / "bench-data").mkdir()
    data = mount / "bench-data" / "data.0"
    data.write_bytes(os.urandom(4 * MIB))
    before = listing(mount)
    fio = FioProcess(
        workload,
        data_dirs={},
        work_dir=tmp_path / "work",
        read_files={"golden": [str(data)]},
    )
    (tmp_path / "work").mkdir()
    rc, text = run_fio(fio)
    assert said in text, text
    assert rc != 0 or workload.rw == "randread"  # a refused extend is only said, not fatal
    assert listing(mount) == before
