"""The chat doors' replay protection (container ``activities``, partition ``id``)."""

from __future__ import annotations

from pydantic import BaseModel


class SeenActivity(BaseModel):
    """A chat activity handled once: the same id again is a replay, refused."""

    id: str
    seen_at_ms: int
