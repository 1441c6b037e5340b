"""Upload receipts (pure logic over the Artifacts port): what an artifact's put answers, so
that the result naming the artifact need not be checked against Blob Storage again.

A result names its artifacts (name, size, SHA-256), and the API stores it only when each
is in Blob Storage as named. It asked Blob Storage with a HEAD per artifact, 3 per result:
at 1,000 clients, 3,000 HEADs in the burst of results after the step (issue 29.2: 13 % of
the API's samples then, on 2 cores). The put itself is where the API sees the bytes, from
the agent holding the item: it answers a receipt, an HMAC of what it stored (run, item,
name, size, SHA-256 of the bytes it stored) under a key the API instances share, and the
result carrying a valid receipt for each artifact needs no HEAD. A receipt proves what the
API stored and no more: a client cannot make one without the key, and one that does not
match (forged, from an older key, for other bytes) sends that artifact to the HEAD as
before, so nothing is accepted that was not before.

The key is a random 32 bytes in Blob Storage under a name no run's can take (run ids are
``r-`` and 32 hex digits, and the API's routes accept no other), written only where none
is (If-None-Match), so instances that find none at once all read the one written; each
reads it again every KEY_TTL_S (should it be deleted, receipts signed before go to HEADs).
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from core.errors import NotFound
from core.ports import Artifacts

# Where the key is kept, as an artifact's (run, owner, name): not a run id any route takes.
KEY_RUN, KEY_OWNER, KEY_NAME = "_service", "receipts", "key"
KEY_TTL_S = 60.0


@dataclass(frozen=True)
class Upload:
    """What an artifact's put stored: its size and the receipt for it."""

    bytes: int
    receipt: str


def _message(run_id: str, item_id: str, name: str, size: int, sha256: str) -> bytes:
    return f"{run_id}\n{item_id}\n{name}\n{size}\n{sha256}".encode()


def sign(key: bytes, run_id: str, item_id: str, name: str, size: int, sha256: str) -> str:
    return hmac.new(key, _message(run_id, item_id, name, size, sha256), "sha256").hexdigest()


def valid(
    key: bytes, receipt: str | None, run_id: str, item_id: str, name: str, size: int, sha256: str
) -> bool:
    if not receipt:
        return False
    return hmac.compare_digest(receipt, sign(key, run_id, item_id, name, size, sha256))


def parse_receipts(header: str | None) -> dict[str, str]:
    """``name=receipt,...`` (the header a result comes with) as a map; what is malformed
    is left out (that artifact is checked in Blob Storage)."""
    found: dict[str, str] = {}
    for part in (header or "").split(","):
        name, eq, receipt = part.strip().partition("=")
        if eq and name and receipt:
            found[name] = receipt
    return found


def receipts_header(receipts: dict[str, str]) -> str:
    return ",".join(f"{name}={r}" for name, r in receipts.items() if r)


class ReceiptKey:
    """The key the API instances share, read from Blob Storage at most every KEY_TTL_S."""

    def __init__(self, artifacts: Artifacts, clock: Callable[[], float] = time.monotonic) -> None:
        self.artifacts = artifacts
        self.clock = clock
        self._key: bytes | None = None
        self._read_at = 0.0
        self._lock = threading.Lock()

    def get(self) -> bytes:
        with self._lock:
            now = self.clock()
            if self._key is None or now - self._read_at >= KEY_TTL_S:
                self._key = self._load()
                self._read_at = now
            return self._key

    def _load(self) -> bytes:
        try:
            return self.artifacts.get(KEY_RUN, KEY_OWNER, KEY_NAME)
        except NotFound:
            pass
        # Only if none is there: of instances that make one at once, one writes it and
        # all read that one (put, each kept its own for a minute: at 21:44 UTC three keys,
        # and 1,334 of 3,000 artifacts were checked in Blob Storage after all).
        self.artifacts.create(KEY_RUN, KEY_OWNER, KEY_NAME, secrets.token_bytes(32))
        return self.artifacts.get(KEY_RUN, KEY_OWNER, KEY_NAME)
