"""Scheduled benchmark runs (continuous monitoring): which cron fire time is due now.

Pure logic, no I/O. A timer trigger calls :func:`due_fire` every minute (or every few
seconds locally) for each enabled schedule. Exactly-once comes from determinism, not locks:
the fire time depends only on (cron, now's minute, last_fired, created_at), and the run is
created with ``Idempotency-Key: fire_key(schedule_id, fire)``, so two overlapping timer
instances computing the same fire time create one run. Downtime yields at most one catch-up:
only the latest missed fire time is ever returned, never the backlog.

Cron expressions are standard 5-field (minute hour day month weekday) and read in UTC.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import CroniterError, croniter
from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from core.models import RunRequest
from core.models.document import JsonObject

MAX_CRON_LEN = 256
# The form a cron must have (an alias, or 5 fields of printable ASCII), said in the OpenAPI
# document so that an empty or one-field cron is invalid there too (issue 24.5); what the
# fields hold is then checked by croniter (a schema cannot tell "0 0 30 2 *" never fires).
CRON_PATTERN = (
    r"^[ \t]*(@(hourly|daily|midnight|weekly|monthly|yearly|annually)"
    r"|[!-~]+([ \t]+[!-~]+){4})[ \t]*$"
)
# For the document only: validate_cron says what is wrong with a cron better than a regex.
CRON_SCHEMA: dict[str, Any] = {"pattern": CRON_PATTERN, "minLength": 1, "maxLength": MAX_CRON_LEN}
MAX_OWNER_LEN = 128
MAX_NAME_LEN = 128

# croniter's own aliases for 5-field forms; @reboot has no fire times, so it is refused.
CRON_ALIASES = frozenset(
    {"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually"}
)
# croniter's "R" picks a random minute per croniter instance: two timers would compute
# different fire times (and so different idempotency keys). "H" needs a hash id we never pass.
# Letters inside names (mar, thu, fri) are not matched.
_RANDOM_OR_HASHED = re.compile(r"(?<![a-z])[hr](?![a-z])")
# Fixed origin for the "does it ever fire" check, so validity does not depend on the clock.
_NEVER_FIRES_ORIGIN = datetime(2000, 1, 1, tzinfo=UTC)


class ScheduleError(ValueError):
    """A bad cron expression or datetime; a ValueError so pydantic reports it per field."""


def validate_cron(expr: str) -> str:
    """Return ``expr`` normalised (single spaces, lowercase alias) or raise ScheduleError."""
    if not isinstance(expr, str):
        raise ScheduleError("cron must be a string")
    if len(expr) > MAX_CRON_LEN:
        raise ScheduleError(f"cron must be at most {MAX_CRON_LEN} characters")
    if not expr.isascii():
        # str.split() and croniter disagree on Unicode whitespace; cron never needs it.
        raise ScheduleError("cron must be ASCII")
    fields = expr.split()
    if not fields:
        raise ScheduleError("cron must not be empty")
    if fields[0].startswith("@"):
        alias = fields[0].lower()
        if len(fields) != 1 or alias not in CRON_ALIASES:
            allowed = ", ".join(sorted(CRON_ALIASES))
            raise ScheduleError(f"unsupported cron alias {expr.strip()!r}; use one of {allowed}")
        normalised = alias
    else:
        if len(fields) != 5:
            raise ScheduleError(
                "cron must have exactly 5 fields (minute hour day month weekday), "
                f"got {len(fields)}; seconds and year fields are not supported"
            )
        if any(_RANDOM_OR_HASHED.search(f.lower()) for f in fields):
            raise ScheduleError("cron must not use random (R) or hashed (H) fields")
        normalised = " ".join(fields)
    try:
        # A valid-looking expression such as "0 0 31 2 *" never fires; refuse it up front
        # rather than failing on every timer tick.
        croniter(normalised, _NEVER_FIRES_ORIGIN).get_next(datetime)
    except CroniterError as e:
        raise ScheduleError(f"invalid cron {expr.strip()!r}: {e}") from e
    return normalised


def _utc(dt: datetime, name: str) -> datetime:
    if not isinstance(dt, datetime):
        raise ScheduleError(f"{name} must be a datetime")
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ScheduleError(f"{name} must be timezone-aware (UTC), got a naive datetime")
    return dt.astimezone(UTC)


def _minute(dt: datetime) -> datetime:
    return dt.replace(second=0, microsecond=0)


def due_fire(
    expr: str, *, now: datetime, last_fired: datetime | None, created_at: datetime
) -> datetime | None:
    """The one fire time that should start now, or None.

    The latest fire time ``f <= now`` is due unless it already fired (``f <= last_fired``)
    or predates the schedule (``f < created_at``). Older missed fire times are never
    returned, so a timer back from downtime starts at most one catch-up run.
    """
    cron = validate_cron(expr)
    now_utc = _utc(now, "now")
    last = None if last_fired is None else _utc(last_fired, "last_fired")
    created = _utc(created_at, "created_at")
    # croniter's get_prev is strictly before its start, so starting one minute past now's
    # minute makes a fire exactly at now (or earlier in the same minute) count.
    start = _minute(now_utc) + timedelta(minutes=1)
    try:
        fire: datetime = croniter(cron, start).get_prev(datetime)
    except CroniterError as e:
        raise ScheduleError(f"cron {cron!r} has no fire time before {now_utc.isoformat()}") from e
    fire = fire.astimezone(UTC)
    if last is not None and fire <= last:
        return None
    if fire < created:
        return None
    return fire


def next_fire(expr: str, *, after: datetime) -> datetime:
    """The first fire time strictly after ``after`` (for display)."""
    cron = validate_cron(expr)
    # Fires are whole minutes, so "after now's minute" is "strictly after now"; starting
    # on the minute also avoids croniter's handling of seconds and microseconds.
    start = _minute(_utc(after, "after"))
    try:
        fire: datetime = croniter(cron, start).get_next(datetime)
    except CroniterError as e:
        raise ScheduleError(f"cron {cron!r} has no fire time after {start.isoformat()}") from e
    return fire.astimezone(UTC)


def fire_key(schedule_id: str, fire: datetime) -> str:
    """The Idempotency-Key of one fire: equal inputs give equal keys, hence one run."""
    if not schedule_id:
        raise ScheduleError("schedule_id must not be empty")
    # Normalised to UTC so an equal instant in another offset cannot yield a second key.
    return f"schedule:{schedule_id}:{_utc(fire, 'fire').isoformat()}"


def template(request: RunRequest) -> JsonObject:
    """A run request as its caller gave it (the fields it set, none of the defaults): what a
    schedule stores and submits at each fire time, so the profile and defaults in force
    then apply.

    JSON, not a RunRequest, on purpose: a model would fill in the defaults of today and
    freeze them into the schedule. It is the caller's input (already validated as a
    RunRequest here, and again as one at each fire time, core.runs.intake), kept raw."""
    return request.model_dump(mode="json", exclude_unset=True)


class Schedule(BaseModel):
    """API body that creates a schedule. The run request is checked with it (strictly, as
    core.validation.parse checks every contract), its errors named ``request.<field>``."""

    model_config = ConfigDict(extra="forbid")

    cron: str = Field(
        description="5-field cron in UTC (minute hour day month weekday)",
        json_schema_extra=CRON_SCHEMA,
    )
    request: RunRequest = Field(description="the run request started at each fire time")
    enabled: bool = True
    owner: str = Field(min_length=1, max_length=MAX_OWNER_LEN)
    name: str | None = Field(None, max_length=MAX_NAME_LEN)

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        return validate_cron(v)

    @field_serializer("request")
    def _as_given(self, request: RunRequest) -> JsonObject:
        return template(request)


class SchedulePatch(BaseModel):
    """API body for PATCH: only the fields sent change (use ``model_fields_set``)."""

    model_config = ConfigDict(extra="forbid")

    cron: str | None = Field(None, description="5-field cron in UTC", json_schema_extra=CRON_SCHEMA)
    request: RunRequest | None = None
    enabled: bool | None = None
    owner: str | None = Field(None, min_length=1, max_length=MAX_OWNER_LEN)
    name: str | None = Field(None, max_length=MAX_NAME_LEN)

    # Validators run only on fields sent, so an explicit null is refused where null would
    # otherwise blank a required field; "name": null is allowed and clears the name.
    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str | None) -> str:
        if v is None:
            raise ValueError("cron cannot be null")
        return validate_cron(v)

    @field_validator("request", "enabled", "owner")
    @classmethod
    def _not_null(cls, v: Any) -> Any:
        if v is None:
            raise ValueError("cannot be null")
        return v

    @field_serializer("request")
    def _as_given(self, request: RunRequest | None) -> JsonObject | None:
        return None if request is None else template(request)
