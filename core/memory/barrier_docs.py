"""The start barrier's shards and the agents' claim marks in the in-memory store (the
documents: core.models.barrier_shard), in each run's partition as the items are."""

from __future__ import annotations

from collections.abc import Sequence

from core.errors import NotFound
from core.memory.documents import Table
from core.models.barrier_shard import BarrierShard, ClaimMark


class BarrierDocs:
    _t: Table

    def get_claim_mark(self, run_id: str, mark_id: str) -> ClaimMark:
        return ClaimMark.model_validate(self._t.read(mark_id, run_id))

    def put_claim_mark(self, mark: ClaimMark) -> None:
        self._t.upsert(mark.doc())

    def get_shard(self, run_id: str, shard_id: str) -> BarrierShard:
        return BarrierShard.model_validate(self._t.read(shard_id, run_id))

    def get_shards(self, run_id: str, shard_ids: Sequence[str]) -> dict[str, BarrierShard]:
        out = {}
        for shard_id in shard_ids:
            try:
                out[shard_id] = self.get_shard(run_id, shard_id)
            except NotFound:
                continue
        return out

    def create_shard(self, shard: BarrierShard) -> BarrierShard:
        return BarrierShard.model_validate(self._t.create(shard.doc()))

    def replace_shard(self, shard: BarrierShard) -> BarrierShard:
        return BarrierShard.model_validate(self._t.replace(shard.doc(), shard.etag))
