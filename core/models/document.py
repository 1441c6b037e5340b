"""The base of the monitoring's stored documents (series points, regressions, schedules):
older documents may lack newer fields (defaults) or carry fields no longer used (ignored);
the ETag is kept for compare-and-swap and never written or served."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue

# A JSON object kept as it was given, whose shape is another contract's: a run request
# template (validated as a RunRequest when used) or a resolved workload as its aggregate
# holds it (the series key is a digest of it, so it is kept byte for byte).
JsonObject = dict[str, JsonValue]


class StoredDoc(BaseModel):
    model_config = ConfigDict(
        extra="ignore", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )
    etag: str | None = Field(None, alias="_etag", exclude=True)

    def doc(self) -> dict[str, Any]:
        """The JSON document to store (without the ETag)."""
        return self.model_dump(mode="json")
