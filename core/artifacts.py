"""How artifacts are written and read (pure): gzip-compressed JSON or bytes, with a
reference (name, size, SHA-256) kept in the result document."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import zlib
from typing import Any, NamedTuple, get_args

from core.models import ArtifactName, ArtifactRef
from core.models.result import (
    INLINE_ARTIFACT_BYTES,
    INLINE_TIMELINE_BYTES,
    INLINE_TIMELINE_UNPACKED_BYTES,
    InlineArtifactName,
)
from core.timeline import ClientTimeline

INLINE_ARTIFACT_NAMES: tuple[InlineArtifactName, ...] = get_args(InlineArtifactName)


def pack(data: bytes) -> bytes:
    # mtime=0: the same content always packs to the same bytes, so a retry is identical.
    return gzip.compress(data, compresslevel=6, mtime=0)


def unpack(data: bytes) -> bytes:
    return gzip.decompress(data)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def ref(name: ArtifactName, packed: bytes) -> ArtifactRef:
    return ArtifactRef(name=name, bytes=len(packed), sha256=sha256_hex(packed))


class Uploads(NamedTuple):
    """What an agent does with its packed artifacts (``uploads``)."""

    sent: dict[ArtifactName, bytes]  # to upload (PUT /api/agent/artifacts/...)
    timeline: str | None  # the result's ``inline_timeline`` (base64)
    carried: dict[InlineArtifactName, str]  # the result's ``inline_artifacts`` (base64)

    def result_fields(self, packed: dict[ArtifactName, bytes]) -> dict[str, Any]:
        """What the result says of ``packed``: each named (``ref``), the small ones carried."""
        return {
            "artifacts": {name: ref(name, data) for name, data in packed.items()},
            "inline_timeline": self.timeline,
            "inline_artifacts": self.carried or None,
        }


def uploads(packed: dict[ArtifactName, bytes], protocol: int) -> Uploads:
    """The artifacts to upload, and those the result carries instead, in base64, to an API
    speaking agent ``protocol``: from 3 the timeline (``inline_timeline``) when it packs to
    at most INLINE_TIMELINE_BYTES and unpacks to at most INLINE_TIMELINE_UNPACKED_BYTES;
    from 4 each other one packed to at most INLINE_ARTIFACT_BYTES (``inline_artifacts``).
    Every one is still named in the result (``ref``)."""
    sent = dict(packed)
    timeline = packed.get("timeline")
    carried_timeline = None
    if protocol >= 3 and timeline is not None and _carriable_timeline(timeline):
        del sent["timeline"]
        carried_timeline = base64.b64encode(timeline).decode()
    carried: dict[InlineArtifactName, str] = {}
    if protocol >= 4:
        for name in INLINE_ARTIFACT_NAMES:
            data = sent.get(name)
            if data is not None and len(data) <= INLINE_ARTIFACT_BYTES:
                del sent[name]
                carried[name] = base64.b64encode(data).decode()
    return Uploads(sent, carried_timeline, carried)


def _carriable_timeline(timeline: bytes) -> bool:
    if len(timeline) > INLINE_TIMELINE_BYTES:
        return False
    try:
        unpack_at_most(timeline, INLINE_TIMELINE_UNPACKED_BYTES)  # as the API checks it
    except ValueError:
        return False
    return True


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


# What unpacking bytes that are not a packed timeline raises: not gzip (OSError, zlib),
# cut short (EOFError), over a bound or not a timeline (ValueError, pydantic's too).
UNREADABLE_TIMELINE = (OSError, EOFError, zlib.error, ValueError)


def unpack_timeline(data: bytes, max_bytes: int | None = None) -> ClientTimeline:
    """``max_bytes``: as ``unpack_at_most``."""
    text = unpack(data) if max_bytes is None else unpack_at_most(data, max_bytes)
    return ClientTimeline.model_validate_json(text)
