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

from pydantic import BaseModel

from core.errors import Conflict, FieldError, Forbidden, StoreUnavailable, ValidationFailed
from core.models import RunRequest
from core.monitoring.schedules import Schedule, SchedulePatch, due_fire, fire_key, next_fire
from core.ports import Doc, Store
from core.runs.guardrails import LOCAL_CALLER, Caller
from core.runs.ownership import check_owner
from core.runs.service import RunService
from core.runs.timer import TickMark
from core.validation import parse, validate

log = logging.getLogger(__name__)
SCHEDULE_ROLE = "engineer"  # schedules are made by engineers (checked at creation)
# What the runner who owns a schedule may change: its runs start as SCHEDULE_ROLE, so a new
# request or cron from a runner would run with more than the runner's rights.
OWNER_FIELDS = frozenset({"enabled", "name"})


def _model(model: type[BaseModel], body: Any) -> Any:
    return parse(model, body)


def _check_template(request: dict[str, Any]) -> None:
    try:
        validate("run-request", request, RunRequest)
    except ValidationFailed as e:
        raise ValidationFailed(
            [FieldError(f"request.{x.field}", x.message) for x in e.errors]
        ) from None


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

    def create(self, body: Any) -> Doc:
        s: Schedule = _model(Schedule, body)
        _check_template(s.request)
        now = self._now()
        doc = {
            "id": "sch-" + uuid.uuid4().hex[:16],
            **s.model_dump(),
            "created_at": now.isoformat(),
            "last_fired": None,
            "last_run_id": None,
            "next_fire": next_fire(s.cron, after=now).isoformat(),
        }
        return _public(self.store.schedules.create(doc))

    def get(self, schedule_id: str) -> Doc:
        return _public(self.store.schedules.get(schedule_id))

    def list_all(self) -> list[Doc]:
        return [_public(d) for d in self.store.schedules.all()]

    def patch(self, schedule_id: str, body: Any, caller: Caller = LOCAL_CALLER) -> Doc:
        """Engineers and admins change any schedule; a runner only ``enabled`` and
        ``name`` of its own (``owner``)."""
        p: SchedulePatch = _model(SchedulePatch, body)
        changes = p.model_dump(exclude_unset=True)
        if "request" in changes:
            _check_template(changes["request"])
        for _ in range(10):
            doc = self.store.schedules.get(schedule_id)
            check_owner(caller, doc.get("owner"), "owner", f"schedule {schedule_id}")
            beyond = sorted(set(changes) - OWNER_FIELDS)
            if beyond and not caller.limits.manage:
                raise Forbidden(
                    [
                        FieldError(f, f"role {caller.role} may change only enabled and name")
                        for f in beyond
                    ]
                )
            if changes.get("enabled") and not doc.get("enabled", True):
                # Re-enabled: fire times missed while it was off are not owed a catch-up.
                doc["created_at"] = self._now().isoformat()
            doc.update(changes)
            doc["next_fire"] = next_fire(doc["cron"], after=self._now()).isoformat()
            try:
                return _public(self.store.schedules.replace(doc))
            except Conflict:
                continue
        raise Conflict(f"schedule {schedule_id} kept changing")

    def delete(self, schedule_id: str, caller: Caller = LOCAL_CALLER) -> None:
        doc = self.store.schedules.get(schedule_id)
        check_owner(caller, doc.get("owner"), "owner", f"schedule {schedule_id}")
        self.store.schedules.delete(schedule_id)

    def tick(self) -> list[str]:
        """Start every due run once; returns the run ids started (or found already started).
        Each schedule on its own: one that fails is logged and tried again next tick, and
        the others go on (issue 24.1)."""
        now = self._now()
        started = []
        for doc in self.store.schedules.all():
            try:
                run_id = self._fire(doc, now)
            except StoreUnavailable as e:
                log.warning("schedule %s: %s (again at the next tick)", doc.get("id"), e)
                continue
            except Exception:  # crash-only: one schedule never ends the tick
                log.exception("schedule %s failed", doc.get("id"))
                continue
            if run_id is not None:
                started.append(run_id)
        self.mark.done(int(now.timestamp() * 1000))
        return started

    def _fire(self, doc: Doc, now: datetime) -> str | None:
        """Start the schedule's due run, if any; returns its id."""
        if not doc.get("enabled", True):
            return None
        last = datetime.fromisoformat(doc["last_fired"]) if doc.get("last_fired") else None
        fire = due_fire(
            doc["cron"],
            now=now,
            last_fired=last,
            created_at=datetime.fromisoformat(doc["created_at"]),
        )
        if fire is None:
            return None
        body = dict(doc["request"])
        body["tags"] = {**body.get("tags", {}), "schedule": doc["id"], "fire": fire.isoformat()}
        caller = Caller(
            name=f"schedule:{doc['id']} ({doc.get('owner', '?')})",
            role=SCHEDULE_ROLE,
            door="schedule",
        )
        try:
            run, _ = self.runs.submit(body, fire_key(doc["id"], fire), caller)
        except (ValidationFailed, Forbidden) as e:
            # The catalogue or the limits changed since the schedule was made: skip this
            # fire time (recorded) rather than retry it every tick.
            log.warning("schedule %s at %s refused: %s", doc["id"], fire.isoformat(), e)
            self._fired(doc["id"], fire, "", now)
            return None
        self._fired(doc["id"], fire, run["id"], now)
        return str(run["id"])

    def _fired(self, schedule_id: str, fire: datetime, run_id: str, now: datetime) -> None:
        for _ in range(10):
            doc = self.store.schedules.get(schedule_id)
            last = doc.get("last_fired")
            if last and datetime.fromisoformat(last) >= fire:
                return  # a racing timer recorded it already
            doc.update(
                last_fired=fire.isoformat(),
                last_run_id=run_id,
                next_fire=next_fire(doc["cron"], after=now).isoformat(),
            )
            try:
                self.store.schedules.replace(doc)
                return
            except Conflict:
                continue


def _public(doc: Doc) -> Doc:
    return {k: v for k, v in doc.items() if not k.startswith("_")}
