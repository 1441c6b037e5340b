"""What an agent relays while fio runs: one small sample per fio status interval (the
agent's heartbeat carries them to the API; core.runs.live keeps the last minute per item).

A sample is the difference of two consecutive fio status outputs (``--status-interval``,
core.engines.fio_live): the I/Os, bytes and total latency fio counted in that interval.
These are live figures only. A run's final figures come from fio's final output and logs,
never from these.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from core.models.document import StoredJson

# JSON numbers stay exact integers up to 2**53; a second's I/Os or bytes are far below.
MAX_COUNT = 2**53
MAX_INTERVAL_MS = 3_600_000  # fio's status interval grows past 1 s for runs over an hour
# Unix ms up to the year 2100: a forged or garbled stamp is refused, not stored.
MAX_UNIX_MS = 4_102_444_800_000


class LiveDirection(BaseModel):
    """One direction's I/O in one interval, as fio counted it: ``total_ios`` and
    ``io_bytes`` (the counters its final iops and bandwidth come from) and the mean of
    total latency (``lat_ns``: submission + completion, core.latency) over the interval's
    completions."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    ios: int = Field(ge=0, le=MAX_COUNT)
    bytes: int = Field(ge=0, le=MAX_COUNT)
    lat_mean_ns: float | None = Field(
        None, ge=0, le=1e15, description="total latency's mean over the interval, ns"
    )


class LiveSample(BaseModel):
    """One fio status interval of one client, ending at ``end_ms`` (Unix ms) after
    ``dur_ms``, both on fio's runtime clock (core.engines.fio_live). A direction the job
    does not do is absent."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    end_ms: int = Field(ge=0, le=MAX_UNIX_MS)
    dur_ms: int = Field(ge=1, le=MAX_INTERVAL_MS)
    read: LiveDirection | None = None
    write: LiveDirection | None = None

    @property
    def start_ms(self) -> int:
        return self.end_ms - self.dur_ms

    def directions(self) -> list[LiveDirection]:
        return [d for d in (self.read, self.write) if d is not None]


LIVE_RING = 60  # the last minute at fio's 1 s status interval


class LiveDoc(BaseModel):
    """An item's live samples, newest last."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    etag: str | None = Field(None, alias="_etag", exclude=True)
    id: str  # the item id
    run_id: str
    kind: str = "live"
    step: int
    client: int
    agent_id: str
    samples: list[LiveSample] = Field(default_factory=list, max_length=LIVE_RING)

    def doc(self) -> StoredJson:
        """As stored (the live container's edge): no nulls."""
        return self.model_dump(mode="json", exclude_none=True)
