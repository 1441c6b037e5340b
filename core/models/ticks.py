"""Each timer's last complete tick (container ``ticks``, partition ``id``): what every API
instance's ``/api/health`` reads."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class TimerTick(BaseModel):
    model_config = ConfigDict(extra="ignore")  # the store's own fields (_etag, _ts)
    id: str  # the timer: runs or schedules
    at_ms: int
