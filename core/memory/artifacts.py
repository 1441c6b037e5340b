"""Artifacts in memory, as Blob Storage keeps them (adapters/blob.py): by run, owner and
name, overwritten by a second put, at most MAX_ARTIFACT_BYTES."""

from __future__ import annotations

from core.errors import NotFound, StoreUnavailable, TooLarge
from core.memory.documents import Faults

MAX_ARTIFACT_BYTES = 256 << 20  # as adapters/blob.py


class MemoryArtifacts:
    def __init__(self, faults: Faults | None = None) -> None:
        self.blobs: dict[str, bytes] = {}
        self.faults = faults

    def _op(self, op: str, key: str) -> None:
        if self.faults is not None and self.faults(op, "artifacts", key) != "ok":
            raise StoreUnavailable(
                f"Blob Storage: {op} {key}: no answer (simulated)", "Blob Storage"
            )

    def put(self, run_id: str, owner: str, name: str, data: bytes) -> None:
        if len(data) > MAX_ARTIFACT_BYTES:
            raise TooLarge(
                f"artifact {name} is {len(data):,} bytes; at most {MAX_ARTIFACT_BYTES:,}"
            )
        key = f"runs/{run_id}/{owner}/{name}"
        self._op("put", key)
        self.blobs[key] = bytes(data)

    def create(self, run_id: str, owner: str, name: str, data: bytes) -> bool:
        key = f"runs/{run_id}/{owner}/{name}"
        self._op("put", key)
        if key in self.blobs:
            return False
        self.blobs[key] = bytes(data)
        return True

    def get(self, run_id: str, owner: str, name: str) -> bytes:
        key = f"runs/{run_id}/{owner}/{name}"
        self._op("get", key)
        try:
            return self.blobs[key]
        except KeyError:
            raise NotFound(f"artifact {name} of {owner}") from None

    def size(self, run_id: str, owner: str, name: str) -> int:
        return len(self.get(run_id, owner, name))
