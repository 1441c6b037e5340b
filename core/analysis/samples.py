"""What aggregation takes in: one client's measured figures, or why a client has none."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from core.analysis.timeline import ClientTimeline
from core.models import Direction, DirectionResult


@dataclass(frozen=True)
class ClientSample:
    """One client's measured figures, from a stored Result or an offline fio output."""

    client: int
    dirs: Mapping[Direction, DirectionResult]  # whole-run figures, fio's own
    timeline: ClientTimeline | None = None
    agent_id: str | None = None
    outstanding_ios: int | None = None  # from core.analysis.concurrency.outstanding_ios
    rate_cap_iops: float | None = None  # this client's IOPS cap (fio rate_iops), if any
    start_skew_ms: float | None = None  # measured I/O start minus the step's instant
    has_bins: bool = True


@dataclass(frozen=True)
class FailedClient:
    client: int
    agent_id: str | None
    error: str
