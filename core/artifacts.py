"""How artifacts are written and read (pure): gzip-compressed JSON or bytes, with a
reference (name, size, SHA-256) kept in the result document."""

from __future__ import annotations

import gzip
import hashlib
import json
from typing import Any

from core.models import ArtifactName, ArtifactRef
from core.timeline import ClientTimeline


def pack(data: bytes) -> bytes:
    # mtime=0: the same content always packs to the same bytes, so a retry is identical.
    return gzip.compress(data, compresslevel=6, mtime=0)


def unpack(data: bytes) -> bytes:
    return gzip.decompress(data)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def ref(name: ArtifactName, packed: bytes) -> ArtifactRef:
    return ArtifactRef(name=name, bytes=len(packed), sha256=sha256_hex(packed))


def pack_json(doc: Any) -> bytes:
    return pack(json.dumps(doc, separators=(",", ":")).encode())


def unpack_json(data: bytes) -> Any:
    return json.loads(unpack(data))


def pack_timeline(timeline: ClientTimeline) -> bytes:
    return pack(timeline.model_dump_json(exclude_none=True).encode())


def unpack_timeline(data: bytes) -> ClientTimeline:
    return ClientTimeline.model_validate_json(unpack(data))
