"""What bound a step: every limit that applies to it, how near the step came to each, and
the one it reached (pure).

The published methods judge each figure against a limit (core.limits): the target's
throughput and IOPS, the clients' network, their CPU, and for managed disks the VM's disk
limits. Utilisation is measured / limit. A step is *bound by* the limit with the highest
utilisation when that is at least ``REACHED`` (90 %; an interface's line rate at
``LINE_REACHED`` of its payload capacity), a storage or network cap before the client's CPU
when both are reached; otherwise it is bound by ``none`` and
names the nearest limit: "a measured figure well below the published limit is a finding
worth reporting".

Reads and writes meet the network differently. Azure meters a VM's network on egress only
("Ingress isn't measured or limited directly", core.limits.sources.VM_NETWORK), so writes
to network storage are bounded by the clients' summed egress allocation, and reads only by
their interfaces' line rate where it is published (core.limits.vms). A read above the
egress allocation is shown against it, marked as not applying: the Azure Files premium
test read 2.7 GiB/s on a D32s_v3 whose egress is 2 GB/s for that reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from core.host_counters import CountersSummary
from core.latency import KIND_NAMES
from core.latency import Kind as LatencyKind
from core.limits.sources import VM_NETWORK
from core.limits.vms import VmSize, vm_size
from core.models import (
    BoundBy,
    CeilingRow,
    DirectionAggregate,
    Knee,
    PercentileSummary,
    StepAggregate,
    StepFigures,
)
from core.models.aggregate import CeilingDirection, CeilingKind, CeilingMetric
from core.models.target_facts import RecordedTarget, RunTargetFacts

REACHED = 0.90
# A physical line is never filled with payload. On 100 Gbps at the VM's MTU of 1,500 bytes a
# TCP/IPv4 segment (timestamps on) carries 1,448 bytes in 1,538 on the wire (Ethernet
# header, FCS, preamble and gap), so the line carries at most 94.1 % of its rate as data.
LINE_PAYLOAD_SHARE = 1448 / 1538
# The published scale-up (one E104id_v5, nconnect) calls its about 10,000 MiB/s of NFS reads
# the interface's "line rate": 89 % of that payload capacity. A line counts as reached at 85 %
# of its payload capacity, calibrated on that result with room for its "about".
LINE_REACHED = 0.85
KNEE_RATIO = 2.0  # latency rising this much over the previous point of a rate curve

Kind = CeilingKind
Metric = CeilingMetric
Direction = CeilingDirection


# How each source counts a busy CPU (core.counters for /proc/stat, core.engines.diskspd_cpu).
CPU_RULES = {
    "proc-stat": "user + system + irq + steal time of all CPUs, mean over the measured period",
    "diskspd": "100 - idle time of all CPUs as DiskSpd measured it (<CpuUtilization>), "
    "over its measured time",
}


@dataclass(frozen=True)
class ClientFacts:
    """One client of a step: its VM size (IMDS) and counters, from its stored result."""

    client: int
    agent_id: str | None
    vm_size: str | None
    cpu_count: int
    counters: CountersSummary | None


@dataclass(frozen=True)
class Ceiling:
    kind: Kind
    name: str
    metric: Metric
    direction: Direction
    limit: float
    measured: float
    rule: str = ""
    source: Mapping[str, str] | None = None
    applies: bool = True  # False: shown for comparison, never the bound (ingress)
    reached_at: float = REACHED

    @property
    def reached(self) -> bool:
        return self.utilisation >= self.reached_at

    @property
    def utilisation(self) -> float:
        return self.measured / self.limit if self.limit > 0 else 0.0

    def as_doc(self) -> CeilingRow:
        return CeilingRow(
            kind=self.kind,
            name=self.name,
            metric=self.metric,
            direction=self.direction,
            limit=self.limit,
            measured=self.measured,
            utilisation=self.utilisation,
            applies=self.applies,
            reached_at=self.reached_at,
            rule=self.rule,
            source=dict(self.source) if self.source else None,
        )


def bound_by(ceilings: Sequence[Ceiling]) -> BoundBy:
    """The limit the step reached (utilisation >= 90 %, a line rate 85 % of its payload
    capacity), else ``none`` with the nearest.

    When several are reached, a limit of the storage or the network (a cap enforced
    outside the client) comes before the client's CPU: a target held at its limit gives no
    more however many CPUs are free, while a busy CPU next to it (other work on the host,
    polling) is a symptom, not the cap."""
    candidates = [c for c in ceilings if c.applies]
    if not candidates:
        return BoundBy(
            kind="none", name="no limit known", limit=None, measured=None, utilisation=None
        )
    reached = [c for c in candidates if c.reached]
    caps = [c for c in reached if c.kind != "client-cpu"]
    top = max(caps or reached or candidates, key=lambda c: c.utilisation)
    return BoundBy(
        kind=top.kind if top.reached else "none",
        name=top.name,
        limit=top.limit,
        measured=top.measured,
        utilisation=top.utilisation,
    )


def _measured(agg: StepFigures, metric: str, direction: str) -> float | None:
    dirs = (agg.read, agg.write) if direction == "total" else (getattr(agg, direction),)
    present: list[DirectionAggregate] = [d for d in dirs if d is not None]
    if not present:
        return None
    return float(sum(float(getattr(d, metric)) for d in present))


def target_ceilings(agg: StepFigures, target_facts: RunTargetFacts | None) -> list[Ceiling]:
    """The run's targets' limits, summed over its targets (a client loads each of them),
    where every target has that limit."""
    if not target_facts:
        return []
    entries = target_facts.targets
    keys = {(lim.metric, lim.direction) for e in entries for lim in e.limits}
    found = (_target_ceiling(agg, entries, metric, direction) for metric, direction in sorted(keys))
    return [c for c in found if c is not None]


def _target_ceiling(
    agg: StepFigures, entries: Sequence[RecordedTarget], metric: Metric, direction: Direction
) -> Ceiling | None:
    per_target = [
        [lim for lim in e.limits if (lim.metric, lim.direction) == (metric, direction)]
        for e in entries
    ]
    measured = _measured(agg, metric, direction)
    if measured is None or not all(per_target):
        return None
    # Several rules for one figure (declared and from facts): the tightest applies.
    tightest = [min(lims, key=lambda lim: float(lim.value)) for lims in per_target]
    names = ", ".join(e.alias for e in entries)
    what = "throughput" if metric == "bw_bytes" else "IOPS"
    label = {"read": "read ", "write": "write ", "total": ""}[direction]
    return Ceiling(
        kind="target",
        name=f"target {names} {label}{what}",
        metric=metric,
        direction=direction,
        limit=sum(float(lim.value) for lim in tightest),
        measured=measured,
        rule="; ".join(lim.rule for lim in tightest),
        source=tightest[0].source,
    )


def _sizes(clients: Sequence[ClientFacts]) -> list[VmSize] | None:
    sizes = [vm_size(c.vm_size) for c in clients]
    if not clients or any(s is None for s in sizes):
        return None  # not all on known Azure sizes: the limits are not known
    return [s for s in sizes if s is not None]


def _size_names(sizes: Sequence[VmSize]) -> str:
    names = sorted({s.name for s in sizes})
    return f"{len(sizes)} x {names[0]}" if len(names) == 1 else ", ".join(names)


def network_ceilings(agg: StepFigures, clients: Sequence[ClientFacts]) -> list[Ceiling]:
    sizes = _sizes(clients)
    if sizes is None:
        return []
    src = VM_NETWORK.as_doc()
    who = _size_names(sizes)
    egress = sum(s.egress_bytes for s in sizes)
    out = []
    written = _measured(agg, "bw_bytes", "write")
    if written is not None:
        out.append(
            Ceiling(
                "client-network",
                f"clients' network egress ({who})",
                "bw_bytes",
                "write",
                egress,
                written,
                rule="writes leave the clients: bounded by their summed egress allocation",
                source=src,
            )
        )
    read = _measured(agg, "bw_bytes", "read")
    if read is not None:
        nics = [s.nic_bytes for s in sizes]
        if all(n is not None for n in nics):
            out.append(
                Ceiling(
                    "client-network",
                    f"clients' NIC line rate ({who})",
                    "bw_bytes",
                    "read",
                    sum(n for n in nics if n is not None) * LINE_PAYLOAD_SHARE,
                    read,
                    rule=(
                        "reads arrive on the clients' interfaces: their line rate as TCP payload"
                        " (1,448 of 1,538 bytes on the wire at MTU 1,500), reached at 85 %"
                    ),
                    source=sizes[0].source.as_doc(),
                    reached_at=LINE_REACHED,
                )
            )
        out.append(
            Ceiling(
                "client-network",
                f"clients' network egress ({who}), not metered for reads",
                "bw_bytes",
                "read",
                egress,
                read,
                rule="ingress isn't measured or limited: reads may exceed the egress allocation",
                source=src,
                applies=False,
            )
        )
    return out


def cpu_ceiling(clients: Sequence[ClientFacts]) -> list[Ceiling]:
    """The busiest client's whole-host CPU: a client at 100 % cannot issue more I/O."""
    busy = [(c.counters.cpu.busy_pct_mean, c) for c in clients if c.counters and c.counters.cpu]
    if not busy:
        return []
    pct, c = max(busy, key=lambda b: b[0])
    name = c.agent_id or f"client {c.client}"
    measured_by = c.counters.cpu.source if c.counters and c.counters.cpu else "proc-stat"
    return [
        Ceiling(
            "client-cpu",
            f"client CPU (busiest: {name}, {c.cpu_count} CPUs)",
            "cpu_pct",
            "total",
            100.0,
            pct,
            rule=CPU_RULES[measured_by],
        )
    ]


def vm_disk_ceilings(
    agg: StepFigures, clients: Sequence[ClientFacts], target_facts: RunTargetFacts | None
) -> list[Ceiling]:
    """A VM's uncached disk limits, summed over clients, when the targets are managed disks."""
    entries = target_facts.targets if target_facts is not None else []
    disks = entries and all(e.fact("kind") == "managed-disk" for e in entries)
    sizes = _sizes(clients) if disks else None
    if not sizes:
        return []
    who = _size_names(sizes)
    out = []
    for metric, limit, unit in (
        ("iops", sum(s.disk_iops for s in sizes), "IOPS"),
        ("bw_bytes", sum(s.disk_mbps * 1e6 for s in sizes), "throughput"),
    ):
        measured = _measured(agg, metric, "total")
        if measured is not None:
            out.append(
                Ceiling(
                    "vm-disk",
                    f"VM uncached disk {unit} ({who})",
                    metric,  # type: ignore[arg-type]
                    "total",
                    float(limit),
                    measured,
                    rule="the VM size's uncached (remote) disk limit",
                    source=sizes[0].source.as_doc(),
                )
            )
    return out


def step_ceilings(
    agg: StepFigures,
    target_facts: RunTargetFacts | None,
    clients: Sequence[ClientFacts],
) -> tuple[list[CeilingRow], BoundBy]:
    """``ceilings`` and ``bound_by`` for one step's aggregate."""
    found = [
        *target_ceilings(agg, target_facts),
        *network_ceilings(agg, clients),
        *cpu_ceiling(clients),
        *vm_disk_ceilings(agg, clients, target_facts),
    ]
    return [c.as_doc() for c in found], bound_by(found)


def _p99(agg: StepFigures) -> tuple[float | None, str]:
    """The worst direction's p99 of the latency views show (core.latency.shown: total
    latency where recorded, else completion), and its kind's name."""
    kinds: list[tuple[LatencyKind, PercentileSummary]] = [
        ("lat", d.lat_ns) if d.lat_ns is not None else ("clat", d.clat_ns) for d in agg.directions()
    ]
    values = [p.p99 for _, p in kinds]
    kind = KIND_NAMES[kinds[0][0]] if kinds else "total"
    return (max(values) if values else None), kind


def latency_knee(aggregates: Sequence[StepAggregate]) -> tuple[int, Knee] | None:
    """On a rate curve (steps in the order they ran, increasing load), the first step whose
    p99 latency is at least twice the previous step's while no limit was reached: where
    queueing starts before any published limit. Returns (index, knee) or None."""
    for i in range(1, len(aggregates)):
        (prev, _), (cur, kind) = _p99(aggregates[i - 1]), _p99(aggregates[i])
        reached = aggregates[i].bound_by.kind != "none"
        if prev and cur and cur >= KNEE_RATIO * prev and not reached:
            return i, Knee(
                p99_ns=cur,
                previous_p99_ns=prev,
                ratio=cur / prev,
                previous_step=aggregates[i - 1].step,
                latency=kind,
                note=f"{kind} p99 latency rose before any known limit was reached",
            )
    return None
