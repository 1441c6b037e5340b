"""fio's status outputs read into total-latency rows (core.engines.fio_status), pure."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from core.engines.fio_status import (
    Snapshot,
    StatusOutput,
    read_output,
    status_interval_s,
    total_latency_rows,
    with_total_latency,
)
from core.timeline import ClientTimeline, DirectionTimeline, histogram_in

T0 = 1_800_000_000_000


def fio_doc(t_ms: int, bins: dict[int, int]) -> dict[str, Any]:
    """A json+ output of one job, reads only, with these cumulative total-latency bins."""
    n = sum(bins.values())
    stats = {"min": 1, "max": 2, "mean": 1.5, "stddev": 0.1, "N": n}
    read = {
        "io_bytes": n * 4096,
        "total_ios": n,
        "runtime": 1000,
        "iops": 1.0,
        "bw_bytes": 1.0,
        "slat_ns": stats,
        "clat_ns": {**stats, "bins": {str(k): v for k, v in bins.items()}},
        "lat_ns": {**stats, "bins": {str(k): v for k, v in bins.items()}},
    }
    return {"fio version": "fio-3.33", "timestamp_ms": t_ms, "jobs": [{"read": read}]}


def test_status_outputs_then_the_final_one() -> None:
    docs = [fio_doc(T0 + 1000 * k, {1000: k + 1}) for k in range(3)]
    text = "fio: note\n" + "\n".join(json.dumps(d, indent=1) for d in docs) + "\n"
    out = read_output(text)
    assert out.notes == "fio: note\n"
    assert out.final == docs[-1]
    assert [s.t_ms for s in out.status] == [T0, T0 + 1000]
    assert out.status[1].bins == {"read": {1000: 2}}
    # fio killed while writing its final output: that object is not taken as final.
    cut = read_output(text[: text.rindex('"jobs"')])
    assert cut.final == docs[1]


def test_status_interval_stays_bounded() -> None:
    assert status_interval_s(60) == 1 and status_interval_s(3600) == 1
    assert status_interval_s(86_400) == 24


cumulative = st.lists(
    st.dictionaries(st.sampled_from([500, 1000, 2048, 70_000]), st.integers(0, 50)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(steps=cumulative, before=st.integers(0, 3))
def test_rows_telescope_to_fios_final_histogram(steps: list[dict[int, int]], before: int) -> None:
    """Whatever the status outputs, the rows inside the period sum to the final histogram
    (outputs before the start, the ramp's, are not counted), each row its own interval."""
    running: dict[int, int] = {}
    snapshots = [Snapshot(T0 - 100 * (k + 1), {"read": {1000: 999}}) for k in range(before)]
    for k, step in enumerate(steps):
        for b, v in step.items():
            running[b] = running.get(b, 0) + v
        snapshots.append(Snapshot(T0 + 700 * (k + 1), {"read": dict(running)}))
    end = T0 + 700 * (len(steps) + 1)
    final = dict(running)
    final[2048] = final.get(2048, 0) + 3  # completions after the last status output
    rows = total_latency_rows(snapshots, fio_doc(end, final), start_ms=T0, end_ms=end)["read"]
    total: dict[str, float] = {}
    for r in rows:
        assert T0 <= r.start_ms < r.end_ms <= end
        for key, count in r.counts.items():
            total[key] = total.get(key, 0.0) + count
    assert total == {str(k): float(v) for k, v in final.items() if v}
    timeline = ClientTimeline(
        start_ms=T0, end_ms=end, read=DirectionTimeline(ios=[1.0], bytes=[1.0])
    )
    tl = with_total_latency(timeline, StatusOutput("", fio_doc(end, final), snapshots))
    assert tl is not None
    expected = {k: float(v) for k, v in final.items() if v}
    assert histogram_in(tl, "read", (T0, end), "lat") == expected
    assert histogram_in(tl, "read", (T0, end), "clat") == {}
