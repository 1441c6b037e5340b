"""Live samples as the API keeps them: one small document per item holding the last
LIVE_RING samples its agent relayed (pure logic over the store's ``live`` repository).

Why a document of its own per item, in a container of its own (``live``, partition
/run_id): the samples change every second, and the item document is the protocol's
compare-and-swap point, read by every view and timer tick. Kept on it, each second's write
would race the protocol's own writes and every read of a run would carry them. Apart, a
heartbeat with a new sample costs one upsert of a document of at most LIVE_RING samples
(~7 kB for one direction, ~12 kB for two: far below Cosmos DB's 2 MB), its bulk excluded
from indexing (bicep/modules/cosmos.bicep), and a view of a run's live figures is one
single-partition query. In Azure the container's TTL drops them a day after the last
write: they are never the run's figures (those come from fio's final output and logs).

Why the agent sends its whole ring (agent.live) rather than only its new samples: the API
then writes without reading first. Measured at 16 clients (bench/live_cost.py), a read
and a compare-and-swap replace per heartbeat doubled the API's CPU per heartbeat; the
ring's few kB of JSON cost far less to parse than a database round trip. Only the agent
holding the item writes it; of two heartbeats that overlap (or a write a paused database
applies late), the later write wins, and a ring a second old is made good by the next beat.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from core.models.live import LIVE_RING, LiveDoc, LiveSample

if TYPE_CHECKING:
    from core.ports import LiveRepo

# A heartbeat carries the agent's ring: at most the last minute of samples.
MAX_SAMPLES_PER_BEAT = LIVE_RING


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
    """Keep an item's ring as its agent sent it (one write, no read): one sample per end
    instant, in time order, the newest LIVE_RING. A new holder (the item redelivered) sends
    a ring of its own, which replaces the last one's."""
    if not samples:
        return None
    doc = LiveDoc(
        id=item_id,
        run_id=run_id,
        step=step,
        client=client,
        agent_id=agent_id,
        samples=merged([], samples),
    )
    return repo.put(doc)
