"""Schedules as stored (container ``schedules``, partition ``id``) and served by
/api/schedules: a cron in UTC and the run request it submits at each fire time
(core.monitoring.scheduler)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from pydantic import Field, ValidationError

from core.models.document import JsonObject, StoredDoc

log = logging.getLogger(__name__)


class StoredSchedule(StoredDoc):
    id: str = Field(description="sch-<16 hex>")
    cron: str = Field(description="5-field cron in UTC (minute hour day month weekday)")
    request: JsonObject = Field(description="the run request template, as it was given")
    enabled: bool = True
    owner: str | None = None
    name: str | None = None
    created_at: str = Field(description="ISO 8601: no fire time before it is owed")
    last_fired: str | None = None
    last_run_id: str | None = Field(None, description="empty: the last fire was refused")
    next_fire: str

    def last_fired_at(self) -> datetime | None:
        return datetime.fromisoformat(self.last_fired) if self.last_fired else None

    def created(self) -> datetime:
        return datetime.fromisoformat(self.created_at)


def readable_schedules(docs: Iterable[Mapping[str, Any]]) -> list[StoredSchedule]:
    """The schedules among stored documents. One the model refuses is logged and left out:
    a damaged document must not stop the timer's tick for the others (crash-only)."""
    out = []
    for doc in docs:
        try:
            out.append(StoredSchedule.model_validate(doc))
        except ValidationError as e:
            log.error("schedule %s unreadable, left out: %s", doc.get("id"), e)
    return out
