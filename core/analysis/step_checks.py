"""The checks on a step's aggregate (pure): how evenly its clients loaded the target, how
far apart they started, how well they scaled, and whether Little's law holds."""

from __future__ import annotations

import math
from collections.abc import Sequence

from core.models import LittlesLaw, OutstandingCheck, RateCapCheck, SkewRange, Spread
from core.timeline import ClientSample

LITTLE_TOLERANCE = 0.20
RATE_CAP_TOLERANCE = 0.10  # a capped client below 90 % of its cap did not get its load


def scaling_efficiency(total_iops: float, clients: int, single_iops: float | None) -> float | None:
    """Against the same workload's 1-client step: the step's IOPS over clients x its IOPS."""
    if single_iops and clients > 1:
        return total_iops / (clients * single_iops)
    return None


def skew_range(samples: Sequence[ClientSample]) -> SkewRange | None:
    skews = [s.start_skew_ms for s in samples if s.start_skew_ms is not None]
    return SkewRange(max=max(skews), min=min(skews)) if skews else None


def spread(values: Sequence[float]) -> Spread | None:
    if not values:
        return None
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return Spread(min=min(values), max=max(values), cv=sd / mean if mean else 0.0)


def littles_law(
    samples: Sequence[ClientSample], total_iops: float, implied: float
) -> LittlesLaw | None:
    """Little's law: I/Os in flight = throughput x time in system. When the measured
    IOPS x mean latency is far from what the clients kept outstanding, the clients were not
    the bottleneck they were configured to be (CPU, network, throttling) or a figure is off.

    A rate-capped client keeps fewer I/Os in flight than it could, by design: there the
    check is whether the clients got the load they were capped at."""
    if not samples:
        return None
    caps = [s.rate_cap_iops for s in samples]
    if any(c is not None for c in caps):
        cap = float(sum(c for c in caps if c is not None))
        ratio = total_iops / cap if cap else 0.0
        return RateCapCheck(
            mode="rate-cap",
            cap_iops=cap,
            achieved_iops=total_iops,
            ratio=ratio,
            flagged=ratio < 1.0 - RATE_CAP_TOLERANCE,
        )
    outstanding = [s.outstanding_ios for s in samples]
    if any(o is None for o in outstanding):
        return None
    configured = float(sum(o for o in outstanding if o is not None))
    ratio = implied / configured if configured else 0.0
    return OutstandingCheck(
        mode="outstanding",
        outstanding_ios=configured,
        implied_ios=implied,
        ratio=ratio,
        flagged=abs(ratio - 1.0) > LITTLE_TOLERANCE,
    )
