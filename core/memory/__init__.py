"""In-memory implementations of the ports (core.ports): a Store with ETag compare-and-swap
and the database's ``_ts``, the work queues with their visibility timeout, dequeue counts,
pop receipts and poison queues, and Artifacts, all on a clock the caller moves.

They exist for the deterministic simulation of the control plane (tests/sim) and are kept
true to the adapters by one suite of contract tests run against both them and the
Cosmos DB stand-in and Azurite (tests/test_ports_contract.py). Pure: no Azure SDK.

Faults: every operation asks ``Faults`` what happens to it (core.memory.documents): it
goes through, fails before doing anything, is applied and then reported failed (its answer
lost), or waits to be applied later (a paused server, ``apply_deferred``).
"""

from core.memory.artifacts import MemoryArtifacts
from core.memory.clock import SimClock
from core.memory.documents import Effect, Faults, Tables
from core.memory.queue import MemoryQueues
from core.memory.store import MemoryStore

__all__ = [
    "Effect",
    "Faults",
    "MemoryArtifacts",
    "MemoryQueues",
    "MemoryStore",
    "SimClock",
    "Tables",
]
