"""The start barrier's readiness, over the step's shards (over the repositories; the
documents: core.models.barrier_shard).

A ready report has written its item (state ``ready``, its round trip); ``join`` adds the
client to its shard by compare-and-swap, and, when that shard is complete, records the
shard on the step document (compare-and-swap again, at most once per shard and round). The
write that records the last shard reads every shard, inside the step's compare-and-swap,
and sets the start instant only if each is complete: of two ready reports completing two
shards at once, the step's ETag lets one see the other's, and a shard seen complete and
then taken back (a client claimed again, ``leave``) is dropped from the step again rather
than started on. Retried ready reports and ``settle`` (a poll or the timer at the
deadline) close the gap a crash leaves between a shard's write and the step's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from core.errors import NotFound
from core.models.barrier_shard import BarrierShard, shard_count, shard_id, shard_of
from core.models.stored import Step
from core.runs.barrier_timing import BARRIER_LEAD_MS, barrier_lead_ms
from core.runs.cas import update

if TYPE_CHECKING:
    from core.ports import Store
    from core.runs.lifecycle import Lifecycle

# clients, round trips, whether every client waits in held calls -> ms from "all ready" to go
Lead = Callable[[int, list[int], bool], int]


def default_lead(clients: int, round_trips: list[int], held: bool) -> int:
    return barrier_lead_ms(clients, round_trips, BARRIER_LEAD_MS, held=held)


def _open(step: Step) -> bool:
    return step.start_at_ms is None and step.failed_reason is None


def _empty(step: Step, shard: int) -> BarrierShard:
    """A shard nobody of which has been ready in the step's current round (never written)."""
    return BarrierShard.empty(step.run_id, step.step, step.barrier_round, shard, step.clients)


def _read(store: Store, run_id: str, sid: str, step: Step, shard: int) -> BarrierShard:
    try:
        return store.items.get_shard(run_id, sid)
    except NotFound:
        return _empty(step, shard)


def _update_shard(
    life: Lifecycle, step: Step, shard: int, change: Callable[[BarrierShard], bool | None]
) -> BarrierShard:
    """Compare-and-swap on one shard of the step's current round, created by its first
    write (two first writes: one creates, the other's Conflict reads it and tries again)."""
    items, run_id = life.store.items, step.run_id
    sid = shard_id(run_id, step.step, step.barrier_round, shard)

    def write(s: BarrierShard) -> BarrierShard:
        return items.create_shard(s) if s.etag is None else items.replace_shard(s)

    return update(lambda: _read(life.store, run_id, sid, step, shard), write, change, sid)


def shards(store: Store, step: Step) -> list[BarrierShard]:
    """Every shard of the step's current round (a constant number of reads, at once)."""
    run_id, count = step.run_id, shard_count(step.clients)
    ids = [shard_id(run_id, step.step, step.barrier_round, k) for k in range(count)]
    found = store.items.get_shards(run_id, ids)
    return [found.get(sid) or _empty(step, k) for k, sid in enumerate(ids)]


def ready_count(store: Store, step: Step) -> int:
    return sum(len(s.ready) for s in shards(store, step))


def join(
    life: Lifecycle,
    step: Step,
    client: int,
    agent_id: str,
    rtt_ms: int | None,
    lead: Lead,
    *,
    held: bool = False,
) -> Step:
    """Record the client as ready (its item says so already), with its round trip and
    whether it waits in held barrier calls; the step as written, with its start instant
    when this report completed the set."""
    if not _open(step):
        return step
    key = str(client)

    def add(s: BarrierShard) -> bool | None:
        same = s.rtt_ms.get(key) == rtt_ms and s.held.get(key, False) == held
        if s.ready.get(key) == agent_id and same:
            return False  # a retry of a ready already recorded
        s.ready[key] = agent_id
        if rtt_ms is None:
            s.rtt_ms.pop(key, None)
        else:
            s.rtt_ms[key] = rtt_ms
        if held:
            s.held[key] = True
        else:
            s.held.pop(key, None)
        return None

    k = shard_of(client, step.clients)
    if not _update_shard(life, step, k, add).complete:
        return step
    return _record(life, step, [k], lead)


def leave(life: Lifecycle, step: Step, client: int) -> None:
    """The client must report ready again (claimed again, or its holder failed and it
    went back to the queue) while the barrier waits: out of its shard, and the shard out
    of the step's complete ones if it was."""
    if not _open(step):
        return
    key = str(client)
    was: list[bool] = []

    def remove(s: BarrierShard) -> bool | None:
        was[:] = [s.complete]
        if key not in s.ready:
            return False
        del s.ready[key]
        s.rtt_ms.pop(key, None)
        s.held.pop(key, None)
        return None

    k = shard_of(client, step.clients)
    if not _update_shard(life, step, k, remove).complete and was and was[0]:

        def drop(s: Step) -> bool | None:
            if not _open(s) or s.barrier_round != step.barrier_round or k not in s.ready_shards:
                return False
            s.ready_shards.remove(k)
            return None

        life.update_step(step.run_id, step.step, drop)


def settle(life: Lifecycle, step: Step, lead: Lead) -> Step:
    """Start the step if every shard is complete (a crash between a shard's write and the
    step's left it unrecorded); the step as it is otherwise."""
    if not _open(step):
        return step
    complete = [s.shard for s in shards(life.store, step) if s.complete]
    if len(complete) < shard_count(step.clients):
        return step
    return _record(life, step, complete, lead)


def _all_held(now: list[BarrierShard]) -> bool:
    """Whether every ready client waits in held barrier calls."""
    return all(x.held.get(k, False) for x in now for k in x.ready)


def _record(life: Lifecycle, step: Step, complete: Iterable[int], lead: Lead) -> Step:
    """Add shards seen complete to the step; the write that makes the set whole checks every
    shard afresh and sets the start instant, or drops the shards no longer complete."""
    seen = set(complete)

    def mark(s: Step) -> bool | None:
        if not _open(s) or s.barrier_round != step.barrier_round:
            return False
        if seen <= set(s.ready_shards):
            return False  # recorded already (whoever made the set whole decided then)
        s.ready_shards = sorted(set(s.ready_shards) | seen)
        if len(s.ready_shards) < shard_count(s.clients):
            return None
        now = shards(life.store, s)
        behind = {x.shard for x in now if not x.complete}
        agents = [a for x in now for a in x.ready.values()]
        if behind:
            s.ready_shards = [k for k in s.ready_shards if k not in behind]
        elif len(set(agents)) == s.clients:  # N distinct agents
            trips = [t for x in now for t in x.rtt_ms.values()]
            at = life.now_ms()
            s.start(at + lead(s.clients, trips, _all_held(now)), set_ms=at)
        return None

    return life.update_step(step.run_id, step.step, mark)
