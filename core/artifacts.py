"""How artifacts are written and read (pure): gzip-compressed JSON or bytes, with a
reference (name, size, SHA-256) kept in the result document."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import zlib
from typing import Any

from core.models import ArtifactName, ArtifactRef
from core.models.result import INLINE_TIMELINE_BYTES, INLINE_TIMELINE_UNPACKED_BYTES
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


def uploads(
    packed: dict[ArtifactName, bytes], inline: bool
) -> tuple[dict[ArtifactName, bytes], str | None]:
    """The artifacts to upload, and the timeline the result carries instead (base64, its
    ``inline_timeline``): with ``inline`` (the API speaks agent protocol 3), when it packs
    to at most INLINE_TIMELINE_BYTES and unpacks to at most INLINE_TIMELINE_UNPACKED_BYTES.
    Every one is still named in the result (``ref``)."""
    timeline = packed.get("timeline")
    if not inline or timeline is None or len(timeline) > INLINE_TIMELINE_BYTES:
        return dict(packed), None
    try:
        unpack_at_most(timeline, INLINE_TIMELINE_UNPACKED_BYTES)  # as the API checks it
    except ValueError:
        return dict(packed), None
    sent: dict[ArtifactName, bytes] = {n: d for n, d in packed.items() if n != "timeline"}
    return sent, base64.b64encode(timeline).decode()


def pack_json(doc: Any) -> bytes:
    return pack(json.dumps(doc, separators=(",", ":")).encode())


def unpack_json(data: bytes) -> Any:
    return json.loads(unpack(data))


def pack_timeline(timeline: ClientTimeline) -> bytes:
    return pack(timeline.model_dump_json(exclude_none=True).encode())


def unpack_at_most(data: bytes, max_bytes: int) -> bytes:
    """``unpack``, refusing (ValueError) what would unpack to more than ``max_bytes``
    before unpacking it, and a second gzip member (which ``unpack`` would append)."""
    gunzip = zlib.decompressobj(wbits=31)  # gzip's header and trailer
    text = gunzip.decompress(data, max_bytes)
    if gunzip.unconsumed_tail:
        raise ValueError(f"unpacks to more than {max_bytes} bytes")
    if not gunzip.eof:
        raise EOFError("the gzip stream ends early")
    if gunzip.unused_data:
        raise ValueError("bytes after the gzip stream")
    return text


def unpack_timeline(data: bytes, max_bytes: int | None = None) -> ClientTimeline:
    """``max_bytes``: as ``unpack_at_most``."""
    text = unpack(data) if max_bytes is None else unpack_at_most(data, max_bytes)
    return ClientTimeline.model_validate_json(text)
