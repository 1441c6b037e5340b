"""The workload catalogue, step planning (sweeps, rate curves, Little's law, repetitions)
and comparability of resolved workloads."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.analysis.concurrency import shape_for
from core.catalogue import PROFILES, get_profile, resolve
from core.engines.fio_job import fill_job_file, job_file
from core.engines.fio_metadata import metadata_job_file
from core.errors import ValidationFailed
from core.models import RunRequest, Workload
from core.models.ids import comparison_key
from core.runs.plan import outstanding_for, plan_steps, resolve_dynamic
from core.validation import validate


@dataclass(frozen=True)
class Reference:
    """What a dynamic step takes from its reference step's aggregate."""

    total_iops: float
    mean_latency_s: float


@pytest.mark.fio
@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_every_profile_is_a_valid_fio_job(profile: object, tmp_path: Path) -> None:
    p = get_profile(profile.name)  # type: ignore[attr-defined]
    dirs = {"vdb1": str(tmp_path / "a"), "vdb2": str(tmp_path / "b")}
    md = p.workload.metadata
    if md is not None:  # one fio job per phase, each on fio's file engines
        assert p.engines == ("fio",) and "DiskSpd has no metadata mode" in p.notes
        assert "https://learn.microsoft.com/" in p.source
        for op in md.ops:
            phase = p.workload.model_copy(update={"metadata": md.model_copy(update={"op": op})})
            job = tmp_path / f"{op}.fio"
            job.write_text(
                metadata_job_file(
                    phase,
                    roots=dirs,
                    log_prefix=str(tmp_path / "log"),
                    start_fifo=str(tmp_path / "g"),
                )
            )
            r = subprocess.run(["fio", "--parse-only", str(job)], capture_output=True, text=True)
            assert r.returncode == 0, (p.name, op, r.stderr)
        return
    for name, text in (
        (
            "run.fio",
            job_file(
                p.workload,
                directories=dirs,
                log_prefix=str(tmp_path / "log"),
                start_fifo=str(tmp_path / "start.fifo"),
            ),
        ),
        ("fill.fio", fill_job_file(p.workload, directories=dirs)),
    ):
        job = tmp_path / name
        job.write_text(text)
        r = subprocess.run(["fio", "--parse-only", str(job)], capture_output=True, text=True)
        assert r.returncode == 0, (p.name, name, r.stderr)


def test_published_defaults_are_pinned() -> None:
    rr = get_profile("anf-vdbench-randread-8k").workload
    assert (rr.rw, rr.bs, rr.numjobs, rr.iodepth, rr.ramp_time, rr.runtime, rr.direct) == (
        "randread",
        "8k",
        25,
        1,
        60,
        600,
        True,
    )
    threads = {p.name: p.workload.numjobs for p in PROFILES if "vdbench" in p.name}
    assert threads == {
        "anf-vdbench-randread-8k": 25,
        "anf-vdbench-randwrite-8k": 20,
        "anf-vdbench-seqread-64k": 20,
        "anf-vdbench-seqwrite-64k": 26,
        "anf-vdbench-seqmix-64k": 6,
        "anf-vdbench-randmix-8k": 25,
    }
    az = get_profile("azfiles-diskspd-randwrite-4k")
    assert (
        az.workload.numjobs,
        az.workload.iodepth,
        az.workload.ramp_time,
        az.workload.runtime,
        az.files_per_target,
    ) == (8, 8, 300, 60, 10)
    for bs in ("4k", "8k", "64k"):
        d = get_profile(f"disk-diskspd-randmix-{bs}").workload
        assert (d.rw, d.rwmixread, d.bs) == ("randrw", 80, bs)


def test_override_resolves_on_top_of_the_profile() -> None:
    req = validate(
        "run-request",
        {
            "target": "s",
            "profile": "anf-vdbench-randread-8k",
            "workload": {"bs": "16k", "runtime": 5},
        },
        RunRequest,
    )
    w = resolve(get_profile(req.profile or ""), req.workload)
    assert (w.bs, w.runtime, w.numjobs, w.ramp_time) == ("16k", 5, 25, 60)


def test_comparison_key_ignores_tags_not_workload() -> None:
    w = get_profile("anf-fio-randread-8k").workload.model_dump()
    same = comparison_key("fio", w, ["vol1"], 4)
    assert same == comparison_key("fio", dict(w), ["vol1"], 4)
    assert same != comparison_key("fio", {**w, "bs": "16k"}, ["vol1"], 4)
    assert same != comparison_key("fio", w, ["vol1"], 8)


def request(**fields: object) -> RunRequest:
    return validate("run-request", {"target": "s", **fields}, RunRequest)


def test_field_sweep_times_clients_times_repetitions() -> None:
    r = request(
        clients=[1, 2],
        sweep={"field": "iodepth", "values": [1, 8]},
        repetitions=2,
        discard_first=True,
    )
    steps = plan_steps(r, Workload())
    assert [(s.clients, s.point, s.repetition, s.discarded) for s in steps] == [
        (1, "iodepth=1", 0, True),
        (1, "iodepth=1", 1, False),
        (1, "iodepth=8", 0, True),
        (1, "iodepth=8", 1, False),
        (2, "iodepth=1", 0, True),
        (2, "iodepth=1", 1, False),
        (2, "iodepth=8", 0, True),
        (2, "iodepth=8", 1, False),
    ]
    assert [s.workload.iodepth for s in steps[:4] if s.workload] == [1, 1, 8, 8]


def test_bad_sweep_value_names_the_field() -> None:
    with pytest.raises(ValidationFailed) as e:
        plan_steps(request(sweep={"field": "bs", "values": ["4k", "4x"]}), Workload())
    assert e.value.errors[0].field == "sweep.values.1"
    with pytest.raises(ValidationFailed) as e:
        plan_steps(request(clients=list(range(1, 17)), repetitions=5), Workload())
    assert e.value.errors[0].field == "sweep"


def test_rate_curve_steps_follow_the_unthrottled_step() -> None:
    steps = plan_steps(request(sweep={"rate_pct": [25, 50, 100]}, clients=2), Workload())
    assert [s.mode for s in steps] == ["rate-max", "rate", "rate", "rate"]
    assert [s.ref_step for s in steps] == [None, 0, 0, 0]
    agg = Reference(total_iops=40_000.0, mean_latency_s=1 / 1e9)
    w = resolve_dynamic(steps[2], Workload(), agg)  # 50% of 40,000 over 2 clients
    assert w.rate_iops == 10_000


def test_littles_law_sizing() -> None:
    assert outstanding_for(3500, 0.0013) == 5  # the METHODOLOGY example: 4.55 -> 5 threads
    assert shape_for(5, 2, engine="fio", ioengine="psync", mounts=1) == {
        "numjobs": 3,
        "iodepth": 1,
    }
    assert shape_for(100, 1, engine="fio", ioengine="libaio", mounts=1) == {
        "numjobs": 4,
        "iodepth": 25,
    }
    steps = plan_steps(request(target_iops=3500), Workload(numjobs=8, iodepth=8))
    probe_step = steps[0].workload
    assert steps[0].mode == "probe" and probe_step is not None and probe_step.numjobs == 1
    assert probe_step.iodepth == 1
    probe = Reference(total_iops=770.0, mean_latency_s=1_300_000 / 1e9)
    sized = resolve_dynamic(steps[1], Workload(ioengine="psync"), probe)
    assert (sized.numjobs, sized.iodepth) == (5, 1)


@pytest.mark.slow
def test_benchctl_plan_prints_the_split() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchctl",
            "plan",
            "--latency-ms",
            "1.3",
            "--iops",
            "3500",
            "--clients",
            "2",
            "--ioengine",
            "psync",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    plan = json.loads(out.stdout)
    assert plan["outstanding_exact"] == pytest.approx(4.55) and plan["outstanding"] == 5
    assert plan["per_client"] == {"numjobs": 3, "iodepth": 1}


DISKSPD_LINES = {
    "azfiles-diskspd-randwrite-4k": "-W300 -C5 -r -w100 -b4K -t8 -o8 -Sh -d60 -L -D1000 -Rxml "
    "-c2G " + " ".join(f"Z:\\bench\\benchsvc{i}.dat" for i in range(10)),
    "disk-diskspd-randmix-4k": "-W0 -C0 -r -w20 -b4K -t16 -o4 -Sh -d300 -L -D1000 -Rxml -c50G "
    "Z:\\bench\\benchsvc0.dat",
    "disk-diskspd-randmix-8k": "-W0 -C0 -r -w20 -b8K -t16 -o4 -Sh -d300 -L -D1000 -Rxml -c50G "
    "Z:\\bench\\benchsvc0.dat",
    "disk-diskspd-randmix-64k": "-W0 -C0 -r -w20 -b64K -t16 -o4 -Sh -d300 -L -D1000 -Rxml "
    "-c50G Z:\\bench\\benchsvc0.dat",
}


def test_diskspd_profiles_give_the_published_command_lines() -> None:
    """Azure Files: -W300 -C5 -r -w100 -b4k -t8 -o8 -Sh -d60 -L -c2G over 10 files; managed
    disks: -c50G -d300 -w20 -r -o4 with 16 threads, at 4, 8 and 64 KiB (METHODOLOGY.md)."""
    from core.engines.diskspd_command import command_line

    lines = {
        p.name: " ".join(
            command_line(
                p.workload,
                targets=["Z:\\bench"],
                files_per_target=p.files_per_target,
                cooldown_s=p.cooldown_s,
            )[1:]
        )
        for p in PROFILES
        if "diskspd" in p.engines
    }
    assert lines == DISKSPD_LINES
