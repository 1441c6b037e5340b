"""Series keys, infrastructure segments and detection inside a segment (pure)."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import numpy as np
import pytest

from adapters.config import ConfigError, Settings
from core.analysis.magnitude import DEFAULT_MIN_MAGNITUDE_PCT
from core.analysis.series import (
    Placed,
    find_changes,
    infra_facts,
    infra_fingerprint,
    segments,
    series_key,
)
from core.models.result import HostFacts, MountFacts
from core.models.series import InfraFacts, StepPoint

NFS = {
    "alias": "vol1",
    "fstype": "nfs",
    "source": "10.0.0.4:/vol1",
    "path": "/",
    "mount_point": "/mnt",
}


def result(options: str, vm: str = "Standard_E32s_v5") -> Placed:
    host = HostFacts(
        hostname="h", kernel="6.1", os="linux", cpu_count=8, vm_size=vm, region="westeurope"
    )
    return SimpleNamespace(host=host, mounts=[MountFacts(**NFS, options=options)])


def points(values: list[float], infra: list[str]) -> list[StepPoint]:
    return [
        StepPoint(
            id=f"p{i}",
            series_key="k",
            run_id=f"r{i}",
            step=0,
            target="vol1",
            time_ms=i * 1000,
            infra=f,
            infra_facts=InfraFacts(hosts=[], mounts=[]),
            metrics={"read.iops": v},
            clients=1,
            engine="fio",
        )
        for i, (v, f) in enumerate(zip(values, infra, strict=True))
    ]


def test_nconnect_change_starts_a_segment_and_is_not_a_regression() -> None:
    before = infra_fingerprint(infra_facts([result("rw,relatime,vers=3,nconnect=8")]))
    after = infra_fingerprint(infra_facts([result("rw,noatime,vers=3,nconnect=4")]))
    same = infra_fingerprint(infra_facts([result("rw,noatime,vers=3,nconnect=8")]))
    assert before != after and before == same  # access-time flags are not infrastructure
    rng = np.random.default_rng(5)
    values = [
        float(v)
        for v in np.r_[np.full(30, 50_000), np.full(30, 30_000)] * (1 + rng.normal(0, 0.02, 60))
    ]
    pts = points(values, [before] * 30 + [after] * 30)
    assert len(segments(pts)) == 2
    assert find_changes(pts) == []  # the drop coincides with the infrastructure change


def test_the_fingerprint_is_the_digest_the_stored_points_hold() -> None:
    """Points stored before the facts had a model keep their segment: the fingerprint is
    the same digest of the same JSON (no ``targets`` key when none is declared)."""
    facts = infra_facts([result("rw,vers=3,nconnect=8")])
    legacy = {
        "hosts": [["Standard_E32s_v5", "westeurope"]],
        "mounts": [["vol1", "nfs", "10.0.0.4:/vol1", "nconnect=8,vers=3"]],
    }
    digest = hashlib.sha256(json.dumps(legacy, sort_keys=True).encode()).hexdigest()[:16]
    assert infra_fingerprint(facts) == digest
    assert (
        StepPoint.model_validate(
            {**points([1.0], ["x"])[0].doc(), "infra_facts": legacy}
        ).infra_facts
        == facts
    )


def test_drop_inside_a_segment_is_a_regression_with_evidence() -> None:
    rng = np.random.default_rng(9)
    values = [
        float(v)
        for v in np.r_[np.full(30, 50_000), np.full(30, 45_000)] * (1 + rng.normal(0, 0.015, 60))
    ]
    (change,) = find_changes(points(values, ["a"] * 60))
    assert change.metric == "read.iops" and change.kind == "regression"
    assert abs(int(change.first_run_id[1:]) - 30) <= 2
    assert change.change_pct is not None and change.change_pct < -5
    assert change.pvalue is not None and change.pvalue < 0.001
    assert len(change.runs_around) >= 3


def test_latency_rise_is_a_regression_and_iops_rise_an_improvement() -> None:
    rng = np.random.default_rng(2)
    up = [
        float(v)
        for v in np.r_[np.full(20, 1000.0), np.full(20, 1300.0)] * (1 + rng.normal(0, 0.02, 40))
    ]
    pts = points(up, ["a"] * 40)
    for p, v in zip(pts, up, strict=True):
        p.metrics = {"read.p99": v, "read.iops": v}
    kinds = {c.metric: c.kind for c in find_changes(pts)}
    # Points recorded before latency named its kind held completion latency: read.clat.p99.
    assert kinds == {"read.clat.p99": "regression", "read.iops": "improvement"}


def test_series_key_ignores_a_plain_runs_rate_cap_not_the_workload() -> None:
    w = {"rw": "randread", "bs": "4k", "iodepth": 1, "rate_iops": None}
    base = series_key(engine="fio", targets=["s"], clients=1, workload=w, mode="measure", point="")
    capped = series_key(
        engine="fio",
        targets=["s"],
        clients=1,
        workload={**w, "rate_iops": 500},
        mode="measure",
        point="",
    )
    other = series_key(
        engine="fio", targets=["s"], clients=1, workload={**w, "bs": "8k"}, mode="measure", point=""
    )
    curve = series_key(
        engine="fio",
        targets=["s"],
        clients=1,
        workload={**w, "rate_iops": 500},
        mode="rate",
        point="rate=10%",
    )
    assert base == capped and base != other and curve != base


def test_changes_below_the_magnitude_floor_are_not_reported() -> None:
    rng = np.random.default_rng(4)
    values = [
        float(v)
        for v in np.r_[np.full(30, 50_000), np.full(30, 48_500)] * (1 + rng.normal(0, 0.002, 60))
    ]
    pts = points(values, ["a"] * 60)
    (change,) = find_changes(pts)  # -3 %: above the default floor of 2 %
    assert abs(int(change.first_run_id[1:]) - 30) <= 2
    assert find_changes(pts, min_magnitude_pct=5.0) == []


def test_magnitude_floor_setting() -> None:
    env = {
        "BENCH_QUEUE_URI": "https://q",
        "BENCH_BLOB_URI": "https://b",
        "BENCH_COSMOS_ENDPOINT": "https://c",
    }
    assert Settings.from_env(env).min_magnitude_pct == DEFAULT_MIN_MAGNITUDE_PCT
    assert Settings.from_env({**env, "BENCH_MIN_MAGNITUDE_PCT": "5"}).min_magnitude_pct == 5.0
    for bad in ("-1", "five", "inf"):
        with pytest.raises(ConfigError, match="BENCH_MIN_MAGNITUDE_PCT"):
            Settings.from_env({**env, "BENCH_MIN_MAGNITUDE_PCT": bad})


def test_points_of_the_first_gate_read_and_serve_as_stored() -> None:
    """Points stored by the first, single-run gate (``no-baseline``, a mean for a baseline)
    and before latency named its kind read as points; their verdicts are served as kept."""
    first = {"verdict": "no-baseline"}
    later = {"verdict": "pass", "value": 5.0, "change_pct": 1.0, "baseline_mean": 4.95}
    doc = {
        **points([5.0], ["x"])[0].doc(),
        "metrics": {"read.iops": 5.0, "read.p99": 1e6},
        "gate": {"read.iops": first, "read.p99": later},
    }
    del doc["judged_at_ms"], doc["tags"]
    point = StepPoint.model_validate(doc).named()
    assert point.metrics == {"read.iops": 5.0, "read.clat.p99": 1e6}
    served = point.model_dump(mode="json")["gate"]
    assert served["read.iops"]["verdict"] == "no-baseline"
    assert served["read.clat.p99"]["baseline_mean"] == 4.95
