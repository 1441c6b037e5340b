"""Documents in memory as the Cosmos DB adapter keeps them (adapters/cosmos/base.py): one
table per container, keyed by partition key and id, each document with its ETag (replaced
on every write) and, where the adapter keeps it, the server's ``_ts`` (whole seconds of
the clock). Azure's limit holds here too: a document is at most 2 MB.

Every operation first asks the fault hook what happens to it (``Effect``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Literal, Protocol

from core.errors import Conflict, NotFound, StoreUnavailable, TooLarge
from core.models.document import StoredJson

MAX_DOCUMENT_BYTES = 2 * 1024 * 1024  # as adapters/cosmos/base.py
# ok: done. fail: refused before anything was done. lost: done, but the answer is lost (the
# caller hears a failure). defer: held, done when the server resumes (the caller hears a
# failure). Reads only ever fail.
Effect = Literal["ok", "fail", "lost", "defer"]


class Faults(Protocol):
    def __call__(self, op: str, table: str, key: str) -> Effect: ...


def _copy(doc: StoredJson) -> StoredJson:
    """What a round trip through JSON gives (no shared objects, JSON types only)."""
    copied: StoredJson = json.loads(json.dumps(doc))
    return copied


def _unavailable(what: str) -> StoreUnavailable:
    return StoreUnavailable(f"Cosmos DB: {what}: no answer (simulated)", "Cosmos DB")


class Tables:
    """Every table of one store, the clock that stamps ``_ts``, the ETag counter, the
    fault hook and the writes held back by a paused server."""

    def __init__(self, clock: Callable[[], float], faults: Faults | None = None) -> None:
        self.clock = clock
        self.faults = faults
        self.deferred: list[Callable[[], object]] = []
        self.writes = 0  # documents written so far

    def etag(self) -> str:
        self.writes += 1
        return f'"{self.writes:08x}"'

    def effect(self, op: str, table: str, key: str) -> Effect:
        return "ok" if self.faults is None else self.faults(op, table, key)

    def apply_deferred(self) -> int:
        """The paused server resumes: the writes it held are applied now, in order (each
        as the server would: a create of an id that exists meanwhile is refused)."""
        held, self.deferred = self.deferred, []
        for write in held:
            try:
                write()
            except (Conflict, NotFound, TooLarge):
                pass  # the server refused it; its caller had heard a failure already
        return len(held)


class Table:
    def __init__(self, tables: Tables, name: str, pk_field: str, *, timestamps: bool = False):
        self.tables = tables
        self.name = name
        self.pk_field = pk_field
        self.timestamps = timestamps
        self.docs: dict[tuple[str, str], StoredJson] = {}

    # ---- plumbing -----------------------------------------------------------------------

    def _what(self, id_: object) -> str:
        return f"{self.name}/{id_}"

    def _out(self, stored: StoredJson) -> StoredJson:
        out = _copy(stored)
        if not self.timestamps:
            out.pop("_ts", None)
        return out

    def _read_op(self, op: str, key: str) -> None:
        if self.tables.effect(op, self.name, key) != "ok":
            raise _unavailable(f"{op} {self._what(key)}")

    def _write_op(self, op: str, key: str, apply: Callable[[], StoredJson]) -> StoredJson:
        effect = self.tables.effect(op, self.name, key)
        if effect == "fail":
            raise _unavailable(f"{op} {self._what(key)}")
        if effect == "defer":
            self.tables.deferred.append(apply)
            raise _unavailable(f"{op} {self._what(key)}")
        out = apply()
        if effect == "lost":
            raise _unavailable(f"{op} {self._what(key)}")
        return out

    def _store(self, doc: StoredJson) -> StoredJson:
        stored = _copy({k: v for k, v in doc.items() if not k.startswith("_")})
        size = len(json.dumps(stored, separators=(",", ":")).encode())
        if size > MAX_DOCUMENT_BYTES:
            raise TooLarge(
                f"{self.name}/{doc.get('id')} is {size:,} bytes; Cosmos DB takes at most "
                f"{MAX_DOCUMENT_BYTES:,}"
            )
        stored["_etag"] = self.tables.etag()
        stored["_ts"] = int(self.tables.clock())
        self.docs[(str(stored[self.pk_field]), str(stored["id"]))] = stored
        return self._out(stored)

    # ---- operations ---------------------------------------------------------------------

    def create(self, doc: StoredJson) -> StoredJson:
        def apply() -> StoredJson:
            if (str(doc[self.pk_field]), str(doc["id"])) in self.docs:
                raise Conflict(f"{self._what(doc['id'])} already exists")
            return self._store(doc)

        return self._write_op("create", str(doc["id"]), apply)

    def create_once(self, doc: StoredJson) -> bool:
        try:
            self.create(doc)
            return True
        except Conflict:
            return False

    def read(self, id_: str, pk: str) -> StoredJson:
        self._read_op("read", id_)
        stored = self.docs.get((pk, id_))
        if stored is None:
            raise NotFound(self._what(id_))
        return self._out(stored)

    def replace(self, doc: StoredJson, etag: str | None) -> StoredJson:
        def apply() -> StoredJson:
            stored = self.docs.get((str(doc[self.pk_field]), str(doc["id"])))
            if stored is None:
                raise NotFound(self._what(doc["id"]))
            if etag is not None and stored["_etag"] != etag:
                raise Conflict(f"{self._what(doc['id'])} changed concurrently")
            return self._store(doc)

        return self._write_op("replace", str(doc["id"]), apply)

    def upsert(self, doc: StoredJson) -> StoredJson:
        return self._write_op("upsert", str(doc["id"]), lambda: self._store(doc))

    def delete(self, id_: str, pk: str) -> None:
        def apply() -> StoredJson:
            if self.docs.pop((pk, id_), None) is None:
                raise NotFound(self._what(id_))
            return {}

        self._write_op("delete", id_, apply)

    def count(self, keep: Callable[[StoredJson], bool], pk: str | None = None) -> int:
        """A query of ``SELECT VALUE COUNT(1)``: one call, no document copied out."""
        self._read_op("query", pk or "*")
        return sum(1 for (p, _), d in self.docs.items() if (pk is None or p == pk) and keep(d))

    def query(self, keep: Callable[[StoredJson], bool], pk: str | None = None) -> list[StoredJson]:
        """A query: the documents ``keep`` selects (of one partition, when given)."""
        self._read_op("query", pk or "*")
        docs: Iterable[StoredJson] = (
            d for (p, _), d in sorted(self.docs.items()) if pk is None or p == pk
        )
        return [self._out(d) for d in docs if keep(d)]
