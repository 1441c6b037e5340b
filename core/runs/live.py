"""Live samples as the API keeps them: one small document per item holding the last
LIVE_RING samples its agent relayed (pure logic over the store's ``live`` repository).

Why a document of its own per item, in a container of its own (``live``, partition
/run_id): the samples change every second, and the item document is the protocol's
compare-and-swap point, read by every view and timer tick. Kept on it, each second's write
would race the protocol's own writes and every read of a run would carry them. Apart, one
heartbeat costs one point read and one replace of a document of at most ~60 samples
(~7 kB for one direction, ~12 kB for two: far below Cosmos DB's 2 MB), its bulk excluded
from indexing (bicep/modules/cosmos.bicep), and a view of a run's live figures is one
single-partition query. In Azure the container's TTL drops them a day after the last
write: they are never the run's figures (those come from fio's final output and logs).

Only the agent holding the item writes it, one heartbeat at a time; a retried or
overlapping heartbeat merges by instant, so a sample is never kept twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from core.errors import Conflict, NotFound
from core.models.live import LiveSample

if TYPE_CHECKING:
    from core.ports import LiveRepo

LIVE_RING = 60  # the last minute at fio's 1 s status interval
# A heartbeat carries what fio wrote since the last one (one sample a second); a few more
# are kept while the API does not answer, the oldest dropped: a live view, not a record.
MAX_SAMPLES_PER_BEAT = 5
WRITE_ATTEMPTS = 3


class LiveDoc(BaseModel):
    """An item's live samples, newest last."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    etag: str | None = Field(None, alias="_etag", exclude=True)
    id: str  # the item id
    run_id: str
    kind: str = "live"
    step: int
    client: int
    agent_id: str
    samples: list[LiveSample] = Field(default_factory=list, max_length=LIVE_RING)

    def doc(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


def merged(
    ring: Iterable[LiveSample], new: Iterable[LiveSample], limit: int = LIVE_RING
) -> list[LiveSample]:
    """The ring with the new samples, one per end instant (a resent sample replaces its
    copy), in time order, the newest ``limit`` kept."""
    by_end = {s.end_ms: s for s in ring}
    by_end.update((s.end_ms, s) for s in new)
    return [by_end[t] for t in sorted(by_end)][-limit:]


def record(
    repo: LiveRepo,
    *,
    run_id: str,
    item_id: str,
    step: int,
    client: int,
    agent_id: str,
    samples: list[LiveSample],
) -> LiveDoc | None:
    """Add an item's new samples to its document. A new holder (the item redelivered)
    starts the ring afresh. None when the document kept changing under us: live figures
    are best effort, and the heartbeat they came with must not fail for them."""
    if not samples:
        return None
    for _ in range(WRITE_ATTEMPTS):
        try:
            current = repo.get(run_id, item_id)
        except NotFound:
            fresh = LiveDoc(
                id=item_id,
                run_id=run_id,
                step=step,
                client=client,
                agent_id=agent_id,
                samples=merged([], samples),
            )
            try:
                return repo.create(fresh)
            except Conflict:
                continue
        ring = current.samples if current.agent_id == agent_id else []
        draft = current.model_copy(
            update={"agent_id": agent_id, "step": step, "samples": merged(ring, samples)}
        )
        try:
            return repo.replace(draft)
        except Conflict:
            continue
    return None
