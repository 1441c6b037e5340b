"""Scheduled runs: CRUD of schedules and the timer's tick (pure apart from the ports).

Exactly once: the run a schedule starts for a fire time is submitted with the
Idempotency-Key ``schedule:<id>:<fire time>`` and an identical body, so two overlapping
timer instances create one run. After downtime only the latest missed fire time runs
(``core.monitoring.schedules.due_fire``): one catch-up, never a burst.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from core.errors import Conflict, FieldError, Forbidden, StoreUnavailable, ValidationFailed
from core.models.schedule import StoredSchedule
from core.monitoring.schedules import Schedule, SchedulePatch, due_fire, fire_key, next_fire
from core.ports import Store
from core.runs.guardrails import LOCAL_CALLER, Caller
from core.runs.ownership import check_owner
from core.runs.service import RunService
from core.runs.timer import TickMark
from core.validation import parse

log = logging.getLogger(__name__)
SCHEDULE_ROLE = "engineer"  # schedules are made by engineers (checked at creation)
# What the runner who owns a schedule may change: its runs start as SCHEDULE_ROLE, so a new
# request or cron from a runner would run with more than the runner's rights.
OWNER_FIELDS = frozenset({"enabled", "name"})


class Scheduler:
    def __init__(
        self, store: Store, runs: RunService, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.store = store
        self.runs = runs
        self.clock = clock
        self.mark = TickMark(store.ticks, "schedules")

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def create(self, body: Any) -> StoredSchedule:
        s = parse(Schedule, body)
        now = self._now()
        schedule = StoredSchedule(
            id="sch-" + uuid.uuid4().hex[:16],
            **s.model_dump(),
            created_at=now.isoformat(),
            last_fired=None,
            last_run_id=None,
            next_fire=next_fire(s.cron, after=now).isoformat(),
        )
        return self.store.schedules.create(schedule)

    def get(self, schedule_id: str) -> StoredSchedule:
        return self.store.schedules.get(schedule_id)

    def list_all(self) -> list[StoredSchedule]:
        return self.store.schedules.all()

    def patch(self, schedule_id: str, body: Any, caller: Caller = LOCAL_CALLER) -> StoredSchedule:
        """Engineers and admins change any schedule; a runner only ``enabled`` and
        ``name`` of its own (``owner``)."""
        patch = parse(SchedulePatch, body)
        for _ in range(10):
            current = self.store.schedules.get(schedule_id)
            check_owner(caller, current.owner, "owner", f"schedule {schedule_id}")
            beyond = sorted(patch.model_fields_set - OWNER_FIELDS)
            if beyond and not caller.limits.manage:
                raise Forbidden(
                    [
                        FieldError(f, f"role {caller.role} may change only enabled and name")
                        for f in beyond
                    ]
                )
            try:
                return self.store.schedules.replace(self._patched(current, patch))
            except Conflict:
                continue
        raise Conflict(f"schedule {schedule_id} kept changing")

    def _patched(self, current: StoredSchedule, patch: SchedulePatch) -> StoredSchedule:
        # Only the fields sent change; ``request`` as its caller gave it (SchedulePatch).
        update = patch.model_dump(exclude_unset=True)
        if patch.enabled and not current.enabled:
            # Re-enabled: fire times missed while it was off are not owed a catch-up.
            update["created_at"] = self._now().isoformat()
        cron = str(update.get("cron", current.cron))
        update["next_fire"] = next_fire(cron, after=self._now()).isoformat()
        return current.model_copy(update=update)

    def delete(self, schedule_id: str, caller: Caller = LOCAL_CALLER) -> None:
        schedule = self.store.schedules.get(schedule_id)
        check_owner(caller, schedule.owner, "owner", f"schedule {schedule_id}")
        self.store.schedules.delete(schedule_id)

    def tick(self) -> list[str]:
        """Start every due run once; returns the run ids started (or found already started).
        Each schedule on its own: one that fails is logged and tried again next tick, and
        the others go on (issue 24.1)."""
        now = self._now()
        started = []
        for schedule in self.store.schedules.all():
            try:
                run_id = self._fire(schedule, now)
            except StoreUnavailable as e:
                log.warning("schedule %s: %s (again at the next tick)", schedule.id, e)
                continue
            except Exception:  # crash-only: one schedule never ends the tick
                log.exception("schedule %s failed", schedule.id)
                continue
            if run_id is not None:
                started.append(run_id)
        self.mark.done(int(now.timestamp() * 1000))
        return started

    def _fire(self, schedule: StoredSchedule, now: datetime) -> str | None:
        """Start the schedule's due run, if any; returns its id."""
        if not schedule.enabled:
            return None
        fire = due_fire(
            schedule.cron,
            now=now,
            last_fired=schedule.last_fired_at(),
            created_at=schedule.created(),
        )
        if fire is None:
            return None
        body = dict(schedule.request)
        tags = body.get("tags")
        body["tags"] = {
            **(tags if isinstance(tags, dict) else {}),
            "schedule": schedule.id,
            "fire": fire.isoformat(),
        }
        caller = Caller(
            name=f"schedule:{schedule.id} ({schedule.owner or '?'})",
            role=SCHEDULE_ROLE,
            door="schedule",
        )
        try:
            run, _ = self.runs.submit(body, fire_key(schedule.id, fire), caller)
        except (ValidationFailed, Forbidden) as e:
            # The catalogue or the limits changed since the schedule was made: skip this
            # fire time (recorded) rather than retry it every tick.
            log.warning("schedule %s at %s refused: %s", schedule.id, fire.isoformat(), e)
            self._fired(schedule.id, fire, "", now)
            return None
        self._fired(schedule.id, fire, run.id, now)
        return run.id

    def _fired(self, schedule_id: str, fire: datetime, run_id: str, now: datetime) -> None:
        for _ in range(10):
            schedule = self.store.schedules.get(schedule_id)
            last = schedule.last_fired_at()
            if last and last >= fire:
                return  # a racing timer recorded it already
            fired = schedule.model_copy(
                update={
                    "last_fired": fire.isoformat(),
                    "last_run_id": run_id,
                    "next_fire": next_fire(schedule.cron, after=now).isoformat(),
                }
            )
            try:
                self.store.schedules.replace(fired)
                return
            except Conflict:
                continue
