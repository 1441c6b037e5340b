"""Taking a run request in: validation, the caller's limits, idempotency, target admission
and the outbox (pure logic over the repositories).

Atomic from the caller's view. Nothing is written unless the whole request is valid and
allowed. The run document is written last, after its steps and its target locks: it is
the commit point. Until it exists nothing can run (a lock held for a run never written is
free after a minute); once it exists the caller gets 202, and the run either starts or
ends failed with a reason: its first step is sent at once if the queue can be reached,
otherwise the timer sends it (the run's outbox), and fails the run, freeing its targets,
if the queue stays out of reach.

With an Idempotency-Key the run id derives from the key: a replay with the same body
returns the same run and sends nothing again; a replay with another body is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.catalogue import get_profile, resolve
from core.errors import Conflict, FieldError, NotFound, ValidationFailed
from core.fleet.service import Fleet
from core.limits.facts import run_target_facts
from core.models import RunRequest
from core.ports import Store
from core.runs.admission import Admission, TargetBusy, lock_keys, target_of
from core.runs.guardrails import (
    LOCAL_CALLER,
    Caller,
    TargetInfo,
    check_run,
    datasets_for,
    unknown_targets,
)
from core.runs.lifecycle import Lifecycle
from core.runs.locks import TargetLock, Waiter
from core.runs.plan import (
    body_hash,
    comparison_key,
    new_run_id,
    plan_steps,
    run_id_for_key,
    step_id,
)
from core.runs.state import Delivery, DeliveryState, Requester, Run, RunState, Step, now_iso
from core.validation import validate

INLINE_DELIVERY_GRACE_MS = 5_000


class IdempotencyMismatch(Conflict):
    pass


class Intake:
    def __init__(
        self,
        store: Store,
        admission: Admission,
        lifecycle: Lifecycle,
        *,
        pools: tuple[str, ...] = ("default",),
        targets: list[TargetInfo] | None = None,
        clock: Callable[[], float] | None = None,
        fleet: Fleet | None = None,
    ) -> None:
        self.store = store
        self.fleet = fleet
        self.admission = admission
        self.life = lifecycle
        self.pools = pools
        self.targets = targets or []  # empty: any target alias an agent mounts

    def submit(
        self,
        body: Any,
        idempotency_key: str | None = None,
        caller: Caller = LOCAL_CALLER,
        traceparent: str | None = None,
    ) -> tuple[Run, bool]:
        """Validate, check the caller's limits, admit, record and send a run's first step.
        Returns (run, created).

        One run at a time per target: when another run holds it, the run waits in line
        (state ``waiting``) or, with ``on_busy: refuse``, is refused with TargetBusy and
        nothing is written."""
        request = validate("run-request", body, RunRequest)
        errors = []
        if request.pool not in self.pools:
            known = ", ".join(self.pools)
            errors.append(FieldError("pool", f"no agent pool {request.pool!r} (known: {known})"))
        profile = None
        if request.profile:
            try:
                profile = get_profile(request.profile)
            except KeyError as e:
                errors.append(FieldError("profile", str(e.args[0])))
        if profile and request.engine not in profile.engines:
            engines = ", ".join(profile.engines)
            errors.append(FieldError("engine", f"profile {profile.name} runs on {engines}"))
        errors += unknown_targets(request, self.targets)
        if errors:
            raise ValidationFailed(errors)
        base = resolve(profile, request.workload)
        specs = plan_steps(request, base)  # raises ValidationFailed for bad sweep values
        fill = request.fill if request.fill is not None else bool(profile and profile.fill)
        check_run(request, specs, base, fill, caller, self.targets)
        if self.fleet is not None:  # can the pool serve it at all (core.fleet.admission)
            fleet_errors = self.fleet.admission_errors(
                pool=request.pool,
                targets=request.all_targets,
                single_target=bool(request.target),
                engine=request.engine,
                clients=max(s["clients"] for s in specs),
            )
            if fleet_errors:
                raise ValidationFailed(fleet_errors)

        run_id = run_id_for_key(idempotency_key) if idempotency_key else new_run_id()
        digest = body_hash(body)
        if idempotency_key:
            replay = self._replay(run_id, digest)
            if replay is not None:
                return replay, False
        targets = request.all_targets
        created_ms = self.life.now_ms()
        me = Waiter(run_id=run_id, created_ms=created_ms)
        keys = lock_keys(request.pool, targets)
        admitted = self._admit_or_wait(keys, me, request.on_busy)
        for spec in specs:
            try:
                self.store.items.create_step(
                    Step(id=step_id(run_id, spec["step"]), run_id=run_id, **spec)
                )
            except Conflict:
                pass  # a replay after a crash before the run was written
        resolved = base.model_dump(mode="json")
        run = Run(
            id=run_id,
            created_at=now_iso(),
            created_ms=created_ms,
            request=request,
            engine=request.engine,
            profile=profile.name if profile else None,
            profile_version=profile.version if profile else None,
            workload=base,
            comparison_key=comparison_key(request.engine, resolved, targets, request.clients),
            fill=fill,
            files_per_target=profile.files_per_target if profile else 1,
            cooldown_s=profile.cooldown_s if profile else 0,
            target=targets[0],
            targets=targets,
            target_facts=run_target_facts(request.pool, targets, self.targets),
            datasets=datasets_for(request, self.targets),
            pool=request.pool,
            tags=request.tags,
            step_count=len(specs),
            items_total=sum(s["clients"] for s in specs),
            state=RunState.QUEUED if admitted else RunState.WAITING,
            admitted=admitted,
            delivery=Delivery(state=DeliveryState.PENDING if admitted else DeliveryState.WAITING),
            requested_by=Requester(**caller.as_doc()),
            body_hash=digest,
            idempotency_key=idempotency_key,
            # Should the first delivery below not finish (a crash), the timer sends it.
            due_ms=created_ms + INLINE_DELIVERY_GRACE_MS if admitted else None,
            traceparent=traceparent,  # the intake span's: the run's trace (core.telemetry)
        )
        try:
            run = self.store.runs.create(run)  # the commit point
        except Conflict:
            replay = self._replay(run_id, digest)
            if replay is None:
                raise
            return replay, False
        if admitted:
            run = self.life.deliver(run)
        return run, True

    def _replay(self, run_id: str, digest: str) -> Run | None:
        """The run an Idempotency-Key already made, if any (a different body is refused).
        A replay finishes a delivery its first call left undone."""
        try:
            run = self.store.runs.get(run_id)
        except NotFound:
            return None
        if run.body_hash != digest:
            raise IdempotencyMismatch(
                "Idempotency-Key was already used with a different request body"
            )
        if run.admitted and run.delivery.state == DeliveryState.PENDING:
            run = self.life.deliver(run)
        return run

    def _admit_or_wait(self, keys: list[str], me: Waiter, on_busy: str) -> bool:
        """Take the run's target locks now if nobody holds them or waits for them; else
        join their queues, or refuse."""
        seen: dict[str, TargetLock] = {}  # the locks busy() read, for the change that follows
        busy = self.admission.busy(keys, me, seen)
        if busy is None and self.admission.try_acquire(keys, me, seen):
            return True
        if on_busy == "refuse":
            who = f"run {busy.holder}" if busy and busy.holder else "another run"
            waiting = f"; {busy.waiting} waiting" if busy and busy.waiting else ""
            target = target_of(busy.key if busy else keys[0])
            raise TargetBusy(f"target {target} is busy with {who}{waiting}")
        self.admission.wait(keys, me, seen)
        return False
