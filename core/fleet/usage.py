"""Client VM time a run used, and what it cost (pure).

A run uses a client VM from the moment its agent claims the item (the VM is taken from the
pool) until the item ends (released back to it): per item, ``claimed_at`` to ``ended_at``
(or now, while it is held). A pool's VM time is its agents' registration to release
(core.models.agents), which also counts the time they wait idle.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TypedDict

from core.models.stored import Item


def _ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


class RunUsage(TypedDict):
    """Agent time a run held, and its cost at the pool's price (a run view's ``usage``)."""

    agent_s: float
    items: int
    price_per_hour: float | None
    cost: float | None


def run_usage(items: Sequence[Item], now_ms: int, price: float | None) -> RunUsage:
    held_ms = 0
    used = 0
    for item in items:
        if item.claimed_at is None:
            continue
        end = _ms(item.ended_at) if item.ended_at else now_ms
        held_ms += max(0, end - _ms(item.claimed_at))
        used += 1
    seconds = held_ms / 1000
    return {
        "agent_s": round(seconds, 3),
        "items": used,
        "price_per_hour": price,
        "cost": None if price is None else round(seconds / 3600 * price, 6),
    }
