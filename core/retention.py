"""What the service keeps, and for how long (pure rules; the docs "Retention" states them).

- Ephemeral documents expire a fixed time after their last write: the bots' replay guards
  (``activities``) and the agent registry's records, rewritten at every heartbeat
  (``agents``: an agent silent that long is forgotten), whole containers of them; and, in
  ``conversations``, finished deliveries: a Teams run thread once its result was posted
  (core.chat.threads; the thread carries its own ``ttl``, as Cosmos DB's per-item TTL has
  it, while open threads and series subscriptions carry none and stay). In Azure this is
  Cosmos DB's TTL (bicep/modules/cosmos.bicep); the local Cosmos DB server has none, so the
  local stack's timer deletes what Cosmos DB would (adapters/retention.py).
- Raw artifacts (fio's and DiskSpd's own output, fio's per-second and histogram logs) move
  to cool storage, then are deleted, a fixed time after they were written: Blob Storage
  lifecycle management in Azure (bicep/modules/storage.bicep), the local timer likewise.
- Everything else stays while what owns it stays: runs with their items, results,
  aggregates, per-second timelines and counters; series with their points and regressions;
  schedules. An admin deleting a run or a series removes everything it owns (what that is:
  :func:`runs_of_series`, :func:`owned_regressions`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeVar

DAY_S = 86_400
# The artifacts that are raw output: a run's figures never read them (its timelines,
# aggregates and counters are kept apart), so they can go.
RAW_ARTIFACTS = frozenset({"raw", "logs"})
RawAction = Literal["cool", "delete"]
# Containers whose documents expire only when they carry a ``ttl`` of their own (Cosmos DB:
# the container's defaultTtl is -1): finished deliveries among lasting documents.
PER_ITEM_TTL = frozenset({"conversations"})
# Where the platform has no TTL nor lifecycle management (the local stack), the timer sweeps
# every quarter of the shortest rule, within these bounds (Retention.sweep_every_s).
SWEEP_MIN_S = 5.0
SWEEP_MAX_S = 60.0


@dataclass(frozen=True)
class Retention:
    activity_ttl_s: float = DAY_S  # bot activity ids and webhook signatures seen
    agent_ttl_s: float = 30 * DAY_S  # after an agent's last heartbeat
    live_ttl_s: float = DAY_S  # a running item's live samples, after their last write
    delivery_ttl_s: float = 7 * DAY_S  # a finished delivery (a run's result posted to Teams)
    raw_cool_days: float = 30.0
    raw_delete_days: float = 365.0

    def __post_init__(self) -> None:
        if not 0 < self.raw_cool_days < self.raw_delete_days:
            raise ValueError("raw artifacts go to cool storage before they are deleted")
        if min(self.activity_ttl_s, self.agent_ttl_s, self.live_ttl_s, self.delivery_ttl_s) <= 0:
            raise ValueError("a time to live is positive")

    def sweep_every_s(self) -> float:
        """How often the local stack's timer applies the rules (adapters/retention.py): a
        quarter of the shortest, from SWEEP_MIN_S to SWEEP_MAX_S. A sweep lists every raw
        artifact and reads each container's expired documents (the local server scans them
        all): every 5 s whatever the rules, it took 15 % of the API's time while 1,000
        clients stored their results (issue 29.2), under rules of a day and more."""
        shortest = min(*self.ttls().values(), self.delivery_ttl_s, self.raw_cool_days * DAY_S)
        return min(SWEEP_MAX_S, max(SWEEP_MIN_S, shortest / 4))

    def ttls(self) -> dict[str, float]:
        """Seconds after its last write that a document of each container expires."""
        return {
            "activities": self.activity_ttl_s,
            "agents": self.agent_ttl_s,
            "live": self.live_ttl_s,
        }

    def expired(
        self, container: str, written_s: float, now_s: float, own_ttl: float | None = None
    ) -> bool:
        """Whether a document written at ``written_s`` has expired, as Cosmos DB judges it:
        its own ``ttl`` when it carries one (-1: never), else its container's."""
        ttl = self.ttls().get(container)
        if own_ttl is not None and (ttl is not None or container in PER_ITEM_TTL):
            ttl = None if own_ttl == -1 else own_ttl
        return ttl is not None and now_s - written_s > ttl

    def finished_delivery_ttl(self) -> int:
        """The ``ttl`` a finished delivery's document carries (whole seconds, as Cosmos DB
        takes it)."""
        return max(1, round(self.delivery_ttl_s))

    def raw_action(
        self, name: str, modified_s: float, now_s: float, tier: str | None
    ) -> RawAction | None:
        """What lifecycle management does to a raw artifact now (None: nothing)."""
        if name not in RAW_ARTIFACTS:
            return None
        age_days = (now_s - modified_s) / DAY_S
        if age_days > self.raw_delete_days:
            return "delete"
        if age_days > self.raw_cool_days and (tier or "").lower() != "cool":
            return "cool"
        return None


R = TypeVar("R", bound=Mapping[str, object])  # a stored regression, as the caller holds it


def runs_of_series(points: Iterable[Mapping[str, object]]) -> list[str]:
    """The runs a series holds: every run with a point in it (deleting the series deletes
    them whole, their points in other series included)."""
    return sorted({str(p["run_id"]) for p in points})


def owned_regressions(regressions: Iterable[R], run_id: str) -> list[R]:
    """A run owns the regressions first seen on it: their evidence starts there."""
    return [r for r in regressions if r.get("first_run_id") == run_id]
