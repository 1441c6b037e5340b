"""``benchctl clean TARGET`` (``POST /api/targets/{alias}/clean``): an agent of the
target's pool removes the benchmark files under ``<mount>/.benchsvc/`` there: the working
sets the agents lay out and keep for the next run, and the metadata trees runs left
(agent.cleanup says what is removed on its own, and when).

The files live on the agents' mounts, so the service only sends the order, on the pool's
queue like a work item; the first agent of the pool that has the target takes it. A target
a run holds or waits for is refused (409 naming the run): its files are in use. The agent
removes only files last changed before it took the order, so a run admitted after it keeps
what it writes.
"""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.errors import Conflict, FieldError, NotFound, ValidationFailed
from core.models import ALIAS_PATTERN, POOL_PATTERN
from core.ports import Queue, Store
from core.runs.admission import holder_done, lock_keys
from core.runs.guardrails import TargetInfo

CLEAN_ID_PATTERN = r"^c-[0-9a-f]{32}$"


class CleanOrder(BaseModel):
    """The queue message: which target of which pool, asked when and by whom."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    v: Literal[1] = 1
    kind: Literal["clean"] = "clean"
    id: str = Field(pattern=CLEAN_ID_PATTERN)
    pool: str = Field(pattern=POOL_PATTERN)
    target: str = Field(pattern=ALIAS_PATTERN)
    requested_by: str = Field(max_length=256)
    requested_at_ms: int = Field(ge=0)


class CleanOrdered(CleanOrder):
    """The order as sent (POST /api/targets/{alias}/clean's answer): the first agent of
    the pool that has the target carries it out (its log says what it removed)."""

    state: Literal["queued"]


def pick_target(targets: list[TargetInfo], alias: str, pool: str | None) -> TargetInfo:
    """The registry entry ``alias`` names (in ``pool``, which may be left out when only one
    pool has such a target). NotFound or ValidationFailed naming the field."""
    found = [t for t in targets if t.alias == alias and (pool is None or t.pool == pool)]
    if not found:
        where = f" in pool {pool}" if pool else ""
        raise NotFound(f"no target {alias}{where}")
    if len(found) > 1:
        pools = ", ".join(sorted(t.pool for t in found))
        why = f"target {alias} is in pools {pools}: name one"
        raise ValidationFailed([FieldError("pool", why)])
    target = found[0]
    if target.read_only:
        raise ValidationFailed(
            [FieldError("alias", f"target {alias} is read-only: agents never write there")]
        )
    return target


def busy(store: Store, pool: str, alias: str) -> str | None:
    """Why the target's files may be in use now: a run holds it or waits for it."""
    (key,) = lock_keys(pool, [alias])
    try:
        lock = store.targets.get(key)
    except NotFound:
        return None
    if lock.run_id is not None:
        try:
            holder = store.runs.get(lock.run_id)
        except NotFound:
            holder = None
        if holder is not None and not holder_done(holder):
            return f"run {holder.id} holds target {alias}: clean it once the run has ended"
    if lock.queue:
        first = min(lock.queue, key=lambda w: w.order)
        return f"run {first.run_id} waits for target {alias}: clean it once the runs have ended"
    return None


def order_clean(
    store: Store,
    queue: Queue,
    targets: list[TargetInfo],
    alias: str,
    pool: str | None,
    by: str,
    *,
    now_ms: int,
) -> CleanOrder:
    """Send the order, or refuse: 404 unknown target, 400 read-only, 409 in use. ``now_ms``:
    the service's clock."""
    target = pick_target(targets, alias, pool)
    reason = busy(store, target.pool, alias)
    if reason:
        raise Conflict(reason)
    order = CleanOrder(
        id=f"c-{uuid.uuid4().hex}",
        pool=target.pool,
        target=alias,
        requested_by=by,
        requested_at_ms=now_ms,
    )
    queue.send_clean(order.pool, order.model_dump_json())
    return order
