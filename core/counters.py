"""A client host's counters, from /proc, as per-second series and a summary (pure).

The agent reads three files once a second while the engine runs; this module turns the
readings into rates:

- ``/proc/stat``, first line: time spent by all CPUs in user, nice, system, idle, iowait,
  irq, softirq and steal, in clock ticks since boot (proc(5)). Guest time is already inside
  user and nice, so it is not added again. *Busy* is everything but idle and iowait.
- ``/proc/net/dev``: per interface, received bytes (first field after the name) and
  transmitted bytes (ninth), since boot (proc(5)).
- ``/proc/self/mountstats``, per NFS mount: the per-op RPC statistics the kernel prints in
  net/sunrpc/stats.c (``rpc_clnt_show_stats``): per operation, ops, transmissions,
  major timeouts, bytes sent, bytes received, queue, RTT and execute milliseconds (summed
  since mount). nfsiostat (nfs-utils, tools/nfs-iostat) reads the same: retransmissions
  are transmissions minus ops, the average RTT and execution time are the milliseconds
  divided by the ops of the interval.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from core.host_counters import CountersSummary, CpuSummary, NetSummary, NfsSummary

CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class CpuTimes:
    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def total(self) -> int:
        return sum(getattr(self, f) for f in CPU_FIELDS)


@dataclass(frozen=True)
class NfsCounters:
    """One NFS mount's RPC totals over all operations, since it was mounted."""

    ops: int = 0
    trans: int = 0
    bytes_sent: int = 0
    bytes_recv: int = 0
    rtt_ms: int = 0
    exe_ms: int = 0


@dataclass(frozen=True)
class Snapshot:
    t_ms: int
    cpu: CpuTimes | None
    net: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # iface: (rx, tx)
    nfs: Mapping[str, NfsCounters] = field(default_factory=dict)  # mount point: totals


def parse_proc_stat(text: str) -> CpuTimes:
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [int(v) for v in parts[1:9]]
            values += [0] * (8 - len(values))  # old kernels print fewer fields
            return CpuTimes(*values)
    raise ValueError("no aggregate cpu line in /proc/stat")


def parse_net_dev(text: str) -> dict[str, tuple[int, int]]:
    out = {}
    for line in text.splitlines()[2:]:  # two header lines
        name, sep, rest = line.partition(":")
        fields = rest.split()
        if sep and len(fields) >= 9:
            out[name.strip()] = (int(fields[0]), int(fields[8]))
    return out


def _unescape(path: str) -> str:
    # The kernel escapes space, tab, newline and backslash in paths as octal (seq_escape).
    for code, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        path = path.replace(code, ch)
    return path


def _nfs_mount(device_line: str, mount_points: Sequence[str] | None) -> str | None:
    """The mount point a ``device`` line opens, if it is an NFS mount we count."""
    words = device_line.split()
    # "device SRC mounted on POINT with fstype nfs4 statvers=1.1"
    shaped = len(words) > 7 and words[2:4] == ["mounted", "on"]
    point = _unescape(words[4]) if shaped else ""
    nfs = shaped and words[7].startswith("nfs")
    wanted = mount_points is None or point in mount_points
    return point if nfs and wanted else None


def parse_mountstats(
    text: str, mount_points: Sequence[str] | None = None
) -> dict[str, NfsCounters]:
    """Per NFS mount point, its RPC totals summed over every operation."""
    out: dict[str, NfsCounters] = {}
    current: str | None = None
    in_ops = False
    sums = [0] * 8
    for line in [*text.splitlines(), "device end"]:
        if line.startswith("device "):
            if current is not None:
                out[current] = NfsCounters(sums[0], sums[1], sums[3], sums[4], sums[6], sums[7])
            current = _nfs_mount(line, mount_points)
            in_ops, sums = False, [0] * 8
            continue
        if current is None:
            continue
        stripped = line.strip()
        if stripped == "per-op statistics":
            in_ops = True
        elif in_ops and ":" in stripped:
            values = stripped.split(":", 1)[1].split()
            if len(values) >= 8:
                sums = [s + int(v) for s, v in zip(sums, values[:8], strict=True)]
    return out


class CounterPoint(BaseModel):
    """One interval (normally a second) ending at ``t_ms``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    t_ms: int
    seconds: float
    cpu: dict[str, float] | None = None  # percent of all CPUs: busy, user, system, iowait, steal
    net: dict[str, dict[str, float]] = {}  # iface: {"rx_bytes": per s, "tx_bytes": per s}
    nfs: dict[str, dict[str, float]] = {}  # mount: ops/s, retrans, avg_rtt_ms, avg_exe_ms


class CounterSeries(BaseModel):
    """The ``counters`` artifact: the host's per-second counters while the engine ran."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    v: int = 1
    points: list[CounterPoint]


def _cpu_pct(a: CpuTimes, b: CpuTimes) -> dict[str, float] | None:
    total = b.total - a.total
    if total <= 0:
        return None

    def pct(*names: str) -> float:
        return 100.0 * sum(int(getattr(b, n)) - int(getattr(a, n)) for n in names) / total

    return {
        "busy": pct("user", "nice", "system", "irq", "softirq", "steal"),
        "user": pct("user", "nice"),
        "system": pct("system", "irq", "softirq"),
        "iowait": pct("iowait"),
        "steal": pct("steal"),
    }


def _nfs_rates(a: NfsCounters, b: NfsCounters, seconds: float) -> dict[str, float]:
    ops = b.ops - a.ops
    return {
        "ops_per_s": ops / seconds,
        "retrans": float(max(0, (b.trans - a.trans) - ops)),
        "avg_rtt_ms": (b.rtt_ms - a.rtt_ms) / ops if ops else 0.0,
        "avg_exe_ms": (b.exe_ms - a.exe_ms) / ops if ops else 0.0,
        "ops": float(ops),
        "rtt_ms": float(b.rtt_ms - a.rtt_ms),
        "exe_ms": float(b.exe_ms - a.exe_ms),
    }


def series(snapshots: Sequence[Snapshot]) -> CounterSeries:
    """Differences of consecutive snapshots, as rates over each interval. A counter that
    went backwards (an interface or mount that came and went) gives no point for it."""
    points = []
    for a, b in itertools.pairwise(snapshots):
        seconds = (b.t_ms - a.t_ms) / 1000
        if seconds <= 0:
            continue
        net = {
            name: {
                "rx_bytes": (rx - a.net[name][0]) / seconds,
                "tx_bytes": (tx - a.net[name][1]) / seconds,
            }
            for name, (rx, tx) in b.net.items()
            if name in a.net and rx >= a.net[name][0] and tx >= a.net[name][1]
        }
        nfs = {
            point: _nfs_rates(a.nfs[point], c, seconds)
            for point, c in b.nfs.items()
            if point in a.nfs and c.ops >= a.nfs[point].ops
        }
        cpu = _cpu_pct(a.cpu, b.cpu) if a.cpu and b.cpu else None
        points.append(CounterPoint(t_ms=b.t_ms, seconds=seconds, cpu=cpu, net=net, nfs=nfs))
    return CounterSeries(points=points)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _clamp(pct: float) -> float:
    return min(100.0, max(0.0, pct))


def _cpu_summary(inside: Sequence[CounterPoint]) -> CpuSummary | None:
    cpus = [p.cpu for p in inside if p.cpu is not None]
    if not cpus:
        return None
    return CpuSummary(
        busy_pct_mean=_clamp(_mean([c["busy"] for c in cpus])),
        busy_pct_max=_clamp(max(c["busy"] for c in cpus)),
        user_pct_mean=_clamp(_mean([c["user"] for c in cpus])),
        system_pct_mean=_clamp(_mean([c["system"] for c in cpus])),
        iowait_pct_mean=_clamp(_mean([c["iowait"] for c in cpus])),
        steal_pct_mean=_clamp(_mean([c["steal"] for c in cpus])),
    )


def _net_summary(inside: Sequence[CounterPoint]) -> NetSummary | None:
    if not inside:
        return None
    rx = [sum(v["rx_bytes"] for k, v in p.net.items() if k != "lo") for p in inside]
    tx = [sum(v["tx_bytes"] for k, v in p.net.items() if k != "lo") for p in inside]
    return NetSummary(
        rx_bytes_mean=_mean(rx),
        rx_bytes_max=max(rx),
        tx_bytes_mean=_mean(tx),
        tx_bytes_max=max(tx),
    )


def _nfs_summary(inside: Sequence[CounterPoint], mount: str) -> NfsSummary:
    rows = [p.nfs[mount] for p in inside if mount in p.nfs]
    ops = sum(r["ops"] for r in rows)
    seconds = sum(p.seconds for p in inside if mount in p.nfs)
    return NfsSummary(
        mount_point=mount,
        ops_per_s=ops / seconds if seconds else 0.0,
        retrans=int(sum(r["retrans"] for r in rows)),
        avg_rtt_ms=sum(r["rtt_ms"] for r in rows) / ops if ops else 0.0,
        avg_exe_ms=sum(r["exe_ms"] for r in rows) / ops if ops else 0.0,
    )


def summarize(
    found: CounterSeries,
    start_ms: int,
    end_ms: int,
    fio_cpu: tuple[float, float] | None = None,
) -> CountersSummary:
    """Means and maxima over the points whose interval lies inside [start_ms, end_ms]
    (the measured period): ramp and layout are not counted."""
    inside = [
        p
        for p in found.points
        if p.t_ms - p.seconds * 1000 >= start_ms - 1 and p.t_ms <= end_ms + 1
    ]
    mounts = sorted({m for p in inside for m in p.nfs})
    return CountersSummary(
        seconds=len(inside),
        cpu=_cpu_summary(inside),
        net=_net_summary(inside),
        nfs=[_nfs_summary(inside, m) for m in mounts],
        fio_usr_cpu_pct=fio_cpu[0] if fio_cpu else None,
        fio_sys_cpu_pct=fio_cpu[1] if fio_cpu else None,
    )


def fio_cpu(doc: Mapping[str, Any]) -> tuple[float, float] | None:
    """fio's own usr/sys CPU, summed over its jobs: each job's figure is that job's CPU
    time over its runtime, in percent of one CPU (fio's stat.c, ``usr_cpu``/``sys_cpu``)."""
    jobs = [j for j in doc.get("jobs", []) if "usr_cpu" in j]
    if not jobs:
        return None
    return (
        sum(float(j["usr_cpu"]) for j in jobs),
        sum(float(j.get("sys_cpu", 0.0)) for j in jobs),
    )
