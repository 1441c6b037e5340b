"""Which fio outputs are measurements: checked on real fio outputs captured here
(tests/data/fio-checks, re-made by its capture.py from the agent's own job files)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from core.engines.fio_check import (
    directions_asked,
    fio_messages,
    measurement_problems,
    permanent_failure,
    rejection,
)
from core.models import Workload

DATA = Path(__file__).parent / "data" / "fio-checks"


def capture(name: str) -> tuple[dict[str, Any], str]:
    """(fio's JSON, the text before it in --output and fio's stderr)."""
    text = (DATA / f"{name}.json").read_text()
    start = text.index("{")
    return json.loads(text[start:]), text[:start] + (DATA / f"{name}.stderr").read_text()


def test_good_runs_pass() -> None:
    doc, said = capture("randread-2jobs")
    assert measurement_problems(doc, Workload(rw="randread", numjobs=2, runtime=2)) == []
    assert fio_messages(said) == []
    doc, _ = capture("randrw-70")
    assert measurement_problems(doc, Workload(rw="randrw", rwmixread=70, runtime=2)) == []


def test_fio_error_fails_with_fios_own_message() -> None:
    # A randwrite on a sparse file of a half-full 16 MiB tmpfs: fio ends with ENOSPC.
    doc, said = capture("enospc-write")
    problems = measurement_problems(doc, Workload(rw="randwrite", size="32m", runtime=2))
    assert problems[0] == "fio job scratch ended with error 28 (No space left on device)"
    assert any("of the 2 s asked" in p for p in problems)  # it stopped after 0.04 s
    messages = fio_messages(said)
    assert any(m.startswith("fio: io_u error on file") for m in messages)
    assert any("err=28" in m for m in messages)
    assert permanent_failure(messages)
    text = rejection(problems, messages)
    assert text.startswith("not a valid measurement: fio job scratch ended with error 28")
    assert "fio said: fio: io_u error" in text and "No space left on device" in text


def test_a_run_stopped_early_is_not_a_result() -> None:
    doc, _ = capture("stopped-early")  # SIGTERM after 2.5 s of a 10 s run
    ran_ms = doc["jobs"][0]["read"]["runtime"]
    assert 2000 < ran_ms < 3000 and doc["jobs"][0]["error"] == 0
    assert measurement_problems(doc, Workload(rw="randread", runtime=10)) == [
        f"fio measured for {ran_ms / 1000:g} s of the 10 s asked"
    ]


def test_steady_state_may_end_the_run_early() -> None:
    doc, _ = capture("steadystate-attained")  # 30 s asked, attained after ~5 s
    assert doc["jobs"][0]["steadystate"]["attained"] == 1
    ss = {"metric": "iops", "limit_pct": 20, "duration_s": 5}
    w = Workload(rw="randread", runtime=30, rate_iops=2000, steadystate=ss)
    assert measurement_problems(doc, w) == []
    # The same output without a steady-state criterion asked for is a run cut short.
    problems = measurement_problems(doc, Workload(rw="randread", runtime=30))
    assert problems and "of the 30 s asked" in problems[0]


def test_every_direction_asked_must_have_io() -> None:
    doc, _ = capture("randread-2jobs")
    assert measurement_problems(doc, Workload(rw="randrw", numjobs=2, runtime=2)) == [
        "fio did no write I/O (rw=randrw)"
    ]
    assert measurement_problems(doc, Workload(rw="randwrite", runtime=2)) == [
        "fio did no write I/O (rw=randwrite)"
    ]
    # A mix with rwmixread=100 asks for reads only.
    assert measurement_problems(doc, Workload(rw="randrw", rwmixread=100, runtime=2)) == []
    assert directions_asked(Workload(rw="rw", rwmixread=0)) == ("write",)


def test_zero_latency_is_not_a_measurement() -> None:
    doc, _ = capture("randrw-70")
    zeroed = copy.deepcopy(doc)
    zeroed["jobs"][0]["write"]["clat_ns"]["percentile"]["50.000000"] = 0
    problems = measurement_problems(zeroed, Workload(rw="randrw", rwmixread=70, runtime=2))
    assert len(problems) == 1 and problems[0].startswith("fio reported zero write latency")


def test_no_jobs() -> None:
    assert measurement_problems({"fio version": "fio-3.33"}, Workload()) == ["fio reported no jobs"]


def test_only_fio_lines_are_its_messages() -> None:
    said = "note\nfio: a\nfio: b\nfio: a\n  fio: c  \n"
    assert fio_messages(said, "fio: d") == ["fio: a", "fio: b", "fio: c", "fio: d"]
    assert not permanent_failure(["fio: io_u error on file x: Input/output error"])
    assert permanent_failure(["fio: engine io_uring not loadable"])


@given(
    asked_s=st.integers(min_value=1, max_value=3600),
    measured_ms=st.integers(min_value=0, max_value=5_000_000),
)
def test_runtime_bound_is_ten_percent_short_or_ten_percent_plus_10s_long(
    asked_s: int, measured_ms: int
) -> None:
    doc, _ = capture("randread-2jobs")
    doc = copy.deepcopy(doc)
    doc["jobs"][0]["read"]["runtime"] = measured_ms
    problems = measurement_problems(doc, Workload(rw="randread", runtime=asked_s))
    asked_ms = asked_s * 1000
    outside = measured_ms < 0.9 * asked_ms or measured_ms > 1.1 * asked_ms + 10_000
    assert bool(problems) == outside
