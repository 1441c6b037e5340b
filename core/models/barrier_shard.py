"""The start barrier's progress, in shards, and the agents' claim marks (pure; issue 29.2).

A step's readiness is not kept on its step document: at 1,000 clients every claim and ready
report rewrote that one document (~100 KB of per-client maps) by compare-and-swap, lost the
race 762 times, and made the request units per client grow with the clients. Each client's
facts are on its own item (state ``ready``, its agent, credential and round trip), and the
set of ready clients is split over ``shard_count`` small documents, client ``c`` in shard
``c % SHARDS``: a ready report rewrites its item and one shard of at most
``ceil(N / SHARDS)`` entries, and the step document is written once per shard that becomes
complete (core.runs.barrier).

A shard's id carries the step's barrier ``round``: a lone client's retry reopens the step
(``Step.reopen``) by counting the round up, which leaves every earlier entry behind at once.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.models.document import StoredJson
from core.models.ids import step_id

# Shards per step (fewer for a step of fewer clients): a constant, so that a ready report
# writes O(1) documents of O(N / SHARDS) entries and the one who sees the set complete reads
# SHARDS documents, whatever N.
SHARDS = 16


def shard_count(clients: int) -> int:
    return max(1, min(SHARDS, clients))


def shard_of(client: int, clients: int) -> int:
    return client % shard_count(clients)


def shard_size(shard: int, clients: int) -> int:
    """How many of the step's clients belong to the shard."""
    return len(range(shard, clients, shard_count(clients)))


def shard_id(run_id: str, step: int, round_: int, shard: int) -> str:
    return f"{step_id(run_id, step)}.b{round_}.{shard}"


class BarrierShard(BaseModel):
    """The ready clients of one shard of a step's barrier, in one barrier round."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    etag: str | None = Field(None, alias="_etag", exclude=True)
    id: str
    run_id: str
    kind: Literal["barrier"] = "barrier"
    step: int
    round: int = 0
    shard: int
    clients: int  # the step's
    ready: dict[str, str] = Field(default_factory=dict)  # client index -> its agent's id
    rtt_ms: dict[str, int] = Field(default_factory=dict)  # client index -> its round trip
    # client index -> True: it waits in held barrier calls (a shorter lead; absent: it polls)
    held: dict[str, bool] = Field(default_factory=dict)

    @classmethod
    def empty(cls, run_id: str, step: int, round_: int, shard: int, clients: int) -> BarrierShard:
        return cls(
            id=shard_id(run_id, step, round_, shard),
            run_id=run_id,
            step=step,
            round=round_,
            shard=shard,
            clients=clients,
        )

    @property
    def complete(self) -> bool:
        return len(self.ready) == shard_size(self.shard, self.clients)

    def doc(self) -> StoredJson:
        return self.model_dump(mode="json")


def claim_mark_id(run_id: str, step: int, agent_id: str) -> str:
    """The id of the agent's claim mark in the step (a digest: an agent id may hold
    characters a Cosmos DB id may not)."""
    digest = hashlib.sha256(agent_id.encode()).hexdigest()[:24]
    return f"{step_id(run_id, step)}.a.{digest}"


class ClaimMark(BaseModel):
    """The item of the step an agent claimed last: a claim reads this one small document to
    ask whether its agent holds another item of the step (issue 29: it read the whole run,
    then a map of every client on the step document), and its holder alone writes it."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    id: str
    run_id: str
    kind: Literal["claim"] = "claim"
    step: int
    agent_id: str
    item_id: str

    def doc(self) -> StoredJson:
        return self.model_dump(mode="json")
