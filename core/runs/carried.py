"""What a result carries of its artifacts instead of their uploads (agent protocols 3 and
4), checked before anything is written: the bytes its ``artifacts`` names (size and
SHA-256), within their bounds, and a timeline the finalizer can read."""

from __future__ import annotations

from core.artifacts import UNREADABLE_TIMELINE, sha256_hex, unpack_timeline
from core.errors import FieldError, ValidationFailed
from core.models import ArtifactName, Result
from core.models.result import (
    INLINE_ARTIFACT_BYTES,
    INLINE_TIMELINE_BYTES,
    INLINE_TIMELINE_UNPACKED_BYTES,
    InlineArtifactName,
)


def carried_timeline(result: Result) -> set[str]:
    """{"timeline"} when the result carries its timeline (checked), else nothing."""
    data = result.carried_timeline()
    if data is None:
        return set()
    if len(data) > INLINE_TIMELINE_BYTES:  # base64's length bound admits 2 bytes more
        why = f"at most {INLINE_TIMELINE_BYTES} bytes: a larger timeline is uploaded"
        raise ValidationFailed([FieldError("inline_timeline", why)])
    if not _named(result, "timeline", data):
        why = "must be the bytes artifacts.timeline names (its size and sha256)"
        raise ValidationFailed([FieldError("inline_timeline", why)])
    try:
        unpack_timeline(data, max_bytes=INLINE_TIMELINE_UNPACKED_BYTES)
    except UNREADABLE_TIMELINE as e:
        why = f"not a packed timeline: {str(e)[:200]}"
        raise ValidationFailed([FieldError("inline_timeline", why)]) from None
    return {"timeline"}


def carried_artifacts(result: Result) -> dict[InlineArtifactName, bytes]:
    """The other artifacts the result carries, each checked against what ``artifacts``
    names. The API keeps them as an upload would (Blob Storage does not read them)."""
    carried = result.carried_artifacts()
    errors = []
    for name, data in carried.items():
        field = f"inline_artifacts.{name}"
        if len(data) > INLINE_ARTIFACT_BYTES:  # base64's length bound admits 2 bytes more
            why = f"at most {INLINE_ARTIFACT_BYTES} bytes: a larger artifact is uploaded"
            errors.append(FieldError(field, why))
        elif not _named(result, name, data):
            why = f"must be the bytes artifacts.{name} names (its size and sha256)"
            errors.append(FieldError(field, why))
    if errors:
        raise ValidationFailed(errors)
    return carried


def _named(result: Result, name: ArtifactName, data: bytes) -> bool:
    named = result.artifacts.get(name)
    return named is not None and named.bytes == len(data) and named.sha256 == sha256_hex(data)
