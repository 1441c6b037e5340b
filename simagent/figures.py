"""What a simulated client "measured": fio's outputs for a declared rate (pure).

A simulated client does no I/O. It declares a rate (``iops`` I/Os per second, each of
``latency_ns`` completion latency) and writes, for its measured period, what fio would
have written at exactly that rate: the json+ document (``--output-format=json+``, one
job), the per-second IOPS and bandwidth logs (``log_avg_msec=1000``, ``log_unix_epoch=1``)
and the histogram log (``log_hist_msec=1000``, full resolution). The agent's own code then
turns them into the result (simagent.client), so the service sees what it sees from fio,
and every figure of a run of N simulated clients is known in advance: N x ``iops``, and
every percentile is ``latency_ns`` (a value fio's histogram can hold exactly: the declared
latency is snapped to the middle of its fio bucket, ``bucket_value``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.engines.fio_logs import FIO_IO_U_PLAT_BITS, FIO_IO_U_PLAT_VAL, plat_idx_to_val
from core.engines.fio_output import PERCENTILES, percentile_key
from core.models import Direction, Workload
from core.units import parse_size

FIO_IO_U_PLAT_GROUP_NR = 29  # fio's stat.h: 29 groups of 64 buckets in a histogram row
FIO_IO_U_PLAT_NR = FIO_IO_U_PLAT_GROUP_NR * FIO_IO_U_PLAT_VAL
SIM_FIO_VERSION = "fio-simulated"
DIRECTION_INDEX: dict[Direction, int] = {"read": 0, "write": 1}


def plat_val_to_idx(value_ns: int) -> int:
    """fio's stat.c ``plat_val_to_idx``: the histogram bucket of a latency (ns)."""
    msb = value_ns.bit_length() - 1 if value_ns > 0 else 0
    if msb <= FIO_IO_U_PLAT_BITS:
        return value_ns
    error_bits = msb - FIO_IO_U_PLAT_BITS
    base = (error_bits + 1) << FIO_IO_U_PLAT_BITS
    return base + ((FIO_IO_U_PLAT_VAL - 1) & (value_ns >> error_bits))


def bucket_value(latency_ns: int) -> int:
    """The value fio's histogram stands a latency for (the middle of its bucket)."""
    return plat_idx_to_val(plat_val_to_idx(latency_ns))


@dataclass(frozen=True)
class DeclaredRate:
    """A simulated client's figures: ``iops`` per second, each I/O ``latency_ns`` long
    (snapped to its fio bucket's value, so percentiles are exact)."""

    iops: int
    latency_ns: int

    def __post_init__(self) -> None:
        if self.iops < 1:
            raise ValueError("iops must be at least 1")
        if self.latency_ns < 1:
            raise ValueError("latency_ns must be at least 1")
        object.__setattr__(self, "latency_ns", bucket_value(self.latency_ns))


def split(rate: DeclaredRate, workload: Workload) -> dict[Direction, int]:
    """I/Os per second by direction: all of them one way, or ``rwmixread`` percent read
    (rounded down) for rw/randrw."""
    if workload.rw in ("read", "randread"):
        return {"read": rate.iops}
    if workload.rw in ("write", "randwrite"):
        return {"write": rate.iops}
    reads = rate.iops * workload.rwmixread // 100
    out: dict[Direction, int] = {}
    if reads:
        out["read"] = reads
    if rate.iops - reads:
        out["write"] = rate.iops - reads
    return out


@dataclass(frozen=True)
class FioOutputs:
    """What fio leaves behind: its final json+ document and one log of each kind."""

    doc: dict[str, Any]
    iops_log: str
    bw_log: str
    hist_log: str


def _latency(rate: DeclaredRate, ios: int) -> dict[str, Any]:
    lat = rate.latency_ns
    return {
        "min": lat,
        "max": lat,
        "mean": float(lat),
        "stddev": 0.0,
        "N": ios,
        "percentile": {percentile_key(p): lat for p in PERCENTILES},
        "bins": {str(lat): ios},
    }


def _direction(rate: DeclaredRate, per_s: int, bs: int, runtime_s: int) -> dict[str, Any]:
    ios = per_s * runtime_s
    lat = _latency(rate, ios)
    return {
        "io_bytes": ios * bs,
        "io_kbytes": ios * bs // 1024,
        "bw_bytes": per_s * bs,
        "bw": per_s * bs // 1024,
        "iops": float(per_s),
        "runtime": runtime_s * 1000,
        "total_ios": ios,
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0},
        "clat_ns": lat,
        "lat_ns": lat,
    }


def fio_outputs(rate: DeclaredRate, workload: Workload, start_ms: int) -> FioOutputs:
    """fio's outputs of one client that measured ``workload`` at ``rate`` from
    ``start_ms`` (Unix ms, the end of its ramp) for ``workload.runtime`` seconds: one log
    line per direction and second, stamped at the second's end, as fio stamps them."""
    bs = parse_size(workload.bs)
    runtime_s = workload.runtime
    rates = split(rate, workload)
    end_ms = start_ms + runtime_s * 1000
    job: dict[str, Any] = {"jobname": "sim", "groupid": 0, "error": 0, "job options": {}}
    for d in ("read", "write"):
        per_s = rates.get(d, 0)
        job[d] = _direction(rate, per_s, bs, runtime_s) if per_s else _idle()
    doc = {
        "fio version": SIM_FIO_VERSION,
        "timestamp": end_ms // 1000,
        "timestamp_ms": end_ms,
        "time": "",
        "jobs": [job],
    }
    bucket = plat_val_to_idx(rate.latency_ns)
    iops, bw, hist = [], [], []
    for second in range(1, runtime_s + 1):
        t = start_ms + second * 1000
        for d, per_s in rates.items():
            i = DIRECTION_INDEX[d]
            iops.append(f"{t}, {per_s}, {i}, {bs}, 0, 0\n")
            bw.append(f"{t}, {per_s * bs // 1024}, {i}, {bs}, 0, 0\n")
            counts = ["0"] * FIO_IO_U_PLAT_NR
            counts[bucket] = str(per_s)
            hist.append(f"{t}, {i}, {bs}, {', '.join(counts)}\n")
    return FioOutputs(doc, "".join(iops), "".join(bw), "".join(hist))


def _idle() -> dict[str, Any]:
    """A direction the job did not do, as fio writes it (zero I/O, empty latency)."""
    empty = {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}
    return {
        "io_bytes": 0,
        "io_kbytes": 0,
        "bw_bytes": 0,
        "bw": 0,
        "iops": 0.0,
        "runtime": 0,
        "total_ios": 0,
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": dict(empty),
        "clat_ns": dict(empty),
        "lat_ns": dict(empty),
    }
