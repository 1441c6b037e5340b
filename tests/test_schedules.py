"""Scheduled runs: each due fire time starts exactly once, with at most one catch-up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from core.monitoring.schedules import (
    Schedule,
    ScheduleError,
    SchedulePatch,
    due_fire,
    fire_key,
    next_fire,
    validate_cron,
)


def t(hh: int, mm: int, ss: int = 0, *, day: int = 1) -> datetime:
    # 2024-01-01 is a Monday.
    return datetime(2024, 1, day, hh, mm, ss, tzinfo=UTC)


EVERY_MINUTE = "* * * * *"


def test_every_minute_fires_once_per_fire_time() -> None:
    created = t(9, 59, 10)
    fire = due_fire(EVERY_MINUTE, now=t(10, 0, 30), last_fired=None, created_at=created)
    assert fire == t(10, 0)
    # The service records last_fired = fire; the next tick in the same minute does nothing.
    again = due_fire(EVERY_MINUTE, now=t(10, 0, 45), last_fired=fire, created_at=created)
    assert again is None
    # Next minute is a new fire time.
    assert due_fire(EVERY_MINUTE, now=t(10, 1, 2), last_fired=fire, created_at=created) == t(10, 1)


def test_overlapping_timers_agree_on_fire_and_key() -> None:
    # Two timer instances read the same state (neither saw the other's write): both compute
    # the same fire time and the same Idempotency-Key, so the service creates one run.
    a = due_fire(EVERY_MINUTE, now=t(10, 0, 30), last_fired=None, created_at=t(9, 59, 10))
    b = due_fire(EVERY_MINUTE, now=t(10, 0, 30), last_fired=None, created_at=t(9, 59, 10))
    assert a is not None and a == b
    assert fire_key("s1", a) == fire_key("s1", b) == "schedule:s1:2024-01-01T10:00:00+00:00"
    # A timer a few seconds later in the same minute still agrees.
    c = due_fire(EVERY_MINUTE, now=t(10, 0, 58), last_fired=None, created_at=t(9, 59, 10))
    assert c == a


def test_downtime_gives_one_catch_up_not_a_burst() -> None:
    created = t(9, 0)
    fires = []
    last = t(10, 0)
    # Timer back after 10 minutes down, then ticking every 10 seconds within the minute.
    for now in (t(10, 10, 30), t(10, 10, 40), t(10, 10, 50)):
        f = due_fire(EVERY_MINUTE, now=now, last_fired=last, created_at=created)
        if f is not None:
            fires.append(f)
            last = f
    assert fires == [t(10, 10)]


def test_never_fires_for_times_before_the_schedule_existed() -> None:
    created = t(10, 5, 20)
    expr = "*/10 * * * *"
    assert due_fire(expr, now=t(10, 5, 30), last_fired=None, created_at=created) is None
    assert due_fire(expr, now=t(10, 9, 59), last_fired=None, created_at=created) is None
    # now exactly on the fire time counts.
    assert due_fire(expr, now=t(10, 10), last_fired=None, created_at=created) == t(10, 10)


def test_created_exactly_on_a_fire_time_fires_it() -> None:
    assert due_fire("0 * * * *", now=t(10, 0, 5), last_fired=None, created_at=t(10, 0)) == t(10, 0)


def test_hourly_expressions() -> None:
    created = t(0, 0)
    for expr in ("0 * * * *", "@hourly"):
        assert due_fire(expr, now=t(10, 59, 59), last_fired=t(9, 0), created_at=created) == t(10, 0)
        assert due_fire(expr, now=t(10, 59, 59), last_fired=t(10, 0), created_at=created) is None
        assert next_fire(expr, after=t(10, 0)) == t(11, 0)
        assert next_fire(expr, after=t(10, 0, 1)) == t(11, 0)


def test_weekday_expression() -> None:
    expr = "30 6 * * 1-5"  # 06:30 Monday to Friday
    created = datetime(2023, 12, 1, tzinfo=UTC)
    # Saturday 2024-01-06 and Sunday 2024-01-07: the latest fire is Friday's; it already ran.
    friday = t(6, 30, day=5)
    assert due_fire(expr, now=t(12, 0, day=7), last_fired=friday, created_at=created) is None
    # Monday 2024-01-08 at 06:30 it fires again.
    assert due_fire(expr, now=t(6, 30, day=8), last_fired=friday, created_at=created) == t(
        6, 30, day=8
    )
    assert next_fire(expr, after=t(7, 0, day=5)) == t(6, 30, day=8)
    assert next_fire("0 9 * * mon-fri", after=t(10, 0, day=6)) == t(9, 0, day=8)


def test_validate_cron_normalises_and_accepts_aliases() -> None:
    assert validate_cron("  0\t9  * * 1-5 ") == "0 9 * * 1-5"
    assert validate_cron("@DAILY") == "@daily"
    for alias in ("@hourly", "@daily", "@weekly", "@monthly", "@yearly"):
        assert validate_cron(alias) == alias
    assert validate_cron("0 0 * * thu,fri") == "0 0 * * thu,fri"
    assert validate_cron("0 0 1 mar,apr *") == "0 0 1 mar,apr *"


@pytest.mark.parametrize(
    ("expr", "needle"),
    [
        ("* * *", "exactly 5 fields"),
        ("", "empty"),
        ("61 * * * *", "invalid cron"),
        ("*/0 * * * *", "invalid cron"),
        ("a b c d e", "invalid cron"),
        ("* * * * * *", "exactly 5 fields"),
        ("*/30 * * * * *", "exactly 5 fields"),
        ("0 0 12 * * ? 2030", "exactly 5 fields"),
        ("@reboot", "alias"),
        ("@every 5m", "alias"),
        ("R * * * *", "random"),
        ("H(0-29) * * * *", "hashed"),
        ("0 0 31 2 *", "invalid cron"),  # croniter accepts it, but it never fires
        ("0\u00a00 * * *", "ASCII"),
        ("0 " * 200, "at most"),
    ],
)
def test_invalid_cron_is_refused(expr: str, needle: str) -> None:
    with pytest.raises(ScheduleError, match=needle):
        validate_cron(expr)
    with pytest.raises(ScheduleError):
        due_fire(expr, now=t(10, 0), last_fired=None, created_at=t(9, 0))


def test_naive_datetimes_are_refused() -> None:
    naive = datetime(2024, 1, 1, 10, 0)
    with pytest.raises(ScheduleError, match="now must be timezone-aware"):
        due_fire(EVERY_MINUTE, now=naive, last_fired=None, created_at=t(9, 0))
    with pytest.raises(ScheduleError, match="last_fired"):
        due_fire(EVERY_MINUTE, now=t(10, 0), last_fired=naive, created_at=t(9, 0))
    with pytest.raises(ScheduleError, match="created_at"):
        due_fire(EVERY_MINUTE, now=t(10, 0), last_fired=None, created_at=naive)
    with pytest.raises(ScheduleError, match="after"):
        next_fire(EVERY_MINUTE, after=naive)
    with pytest.raises(ScheduleError, match="fire"):
        fire_key("s1", naive)


def test_other_offsets_are_read_as_the_same_instant_in_utc() -> None:
    plus2 = timezone(timedelta(hours=2))
    now = datetime(2024, 1, 1, 12, 0, 30, tzinfo=plus2)  # 10:00:30 UTC
    fire = due_fire("0 10 * * *", now=now, last_fired=None, created_at=t(0, 0))
    assert fire == t(10, 0) and fire is not None and fire.utcoffset() == timedelta(0)
    # Same instant, different offset: same key.
    assert fire_key("s1", t(10, 0)) == fire_key("s1", t(10, 0).astimezone(plus2))


def test_schedule_model() -> None:
    s = Schedule.model_validate(
        {"cron": " 0  *  * * * ", "request": {"target": "scratch"}, "owner": "alice"}
    )
    assert s.cron == "0 * * * *" and s.enabled is True and s.name is None

    with pytest.raises(ValidationError) as e:
        Schedule.model_validate({"cron": "* * *", "request": {}, "owner": "a", "colour": "x"})
    errors = {err["loc"]: err for err in e.value.errors()}
    assert set(errors) == {("cron",), ("colour",)}
    assert errors[("colour",)]["type"] == "extra_forbidden"
    assert "exactly 5 fields" in errors[("cron",)]["msg"]
    assert "cron" in str(e.value)

    with pytest.raises(ValidationError) as e:
        Schedule.model_validate({"cron": "@hourly", "request": {}, "owner": ""})
    assert [err["loc"] for err in e.value.errors()] == [("owner",)]

    with pytest.raises(ValidationError) as e:
        Schedule.model_validate({"cron": "@hourly", "request": {}, "owner": "a", "name": "n" * 129})
    assert [err["loc"] for err in e.value.errors()] == [("name",)]


def test_schedule_patch_model() -> None:
    p = SchedulePatch.model_validate({"enabled": False})
    assert p.model_fields_set == {"enabled"} and p.cron is None
    assert SchedulePatch.model_validate({"cron": "*/5 * * * *"}).cron == "*/5 * * * *"
    # name may be cleared with null.
    assert SchedulePatch.model_validate({"name": None}).model_fields_set == {"name"}

    with pytest.raises(ValidationError) as e:
        SchedulePatch.model_validate({"cron": "* * * * * *", "owner_id": "x"})
    errors = {err["loc"]: err for err in e.value.errors()}
    assert set(errors) == {("cron",), ("owner_id",)}
    assert "exactly 5 fields" in errors[("cron",)]["msg"]

    with pytest.raises(ValidationError) as e:
        SchedulePatch.model_validate({"cron": None, "enabled": None, "owner": None})
    assert {err["loc"] for err in e.value.errors()} == {("cron",), ("enabled",), ("owner",)}


def test_an_imported_schedule_needs_the_times_the_scheduler_reads() -> None:
    """The admin import checks a schedule as the scheduler will read it (StoredSchedule):
    one without its creation time would never fire, so it is refused, naming it."""
    from adapters.archive import _checked_schedule
    from core.errors import ValidationFailed
    from core.models.schedule import StoredSchedule
    from tests.conftest import run_body

    whole = {
        "id": "sch-0123456789abcdef",
        "cron": "0 3 * * *",
        "owner": "ops",
        "request": run_body("default"),
        "created_at": "2031-03-04T10:00:00+00:00",
        "next_fire": "2031-03-05T03:00:00+00:00",
        "_etag": '"1"',
    }
    kept = _checked_schedule(0, whole)
    assert StoredSchedule.model_validate(kept).created_at == whole["created_at"]
    assert "_etag" not in kept and kept["last_fired"] is None
    without = {k: v for k, v in whole.items() if k != "created_at"}
    with pytest.raises(ValidationFailed) as e:
        _checked_schedule(3, without)
    assert [x.field for x in e.value.errors] == ["schedules.3.created_at"]
