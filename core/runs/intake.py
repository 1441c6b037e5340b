"""Taking a run request in: validation, the caller's limits, idempotency, target admission
and the outbox (pure logic over the repositories).

Atomic from the caller's view. Nothing is written unless the whole request is valid and
allowed. The run document is written last, after its steps and its target locks: it is
the commit point, as the database timestamps it (core.runs.commit). Until it is stored in
time nothing can run (a lock held for a run never written is free after a minute); once it
is, and the request was not answered already, the caller gets 202, and the run either
starts or ends failed with a reason: its first step is sent at once if the queue can be
reached, otherwise the timer sends it (the run's outbox), and fails the run, freeing its
targets, if the queue stays out of reach. A creation answered with an error is void: it
never runs.

With an Idempotency-Key the run id derives from the key: a replay with the same body
returns the same run and sends nothing again; a replay with another body is refused. A
replay of a void run (its first request was answered 503) makes it anew.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from core.catalogue import Profile, get_profile, resolve
from core.errors import Conflict, FieldError, NotFound, StoreUnavailable, ValidationFailed
from core.fleet.service import Fleet
from core.limits.facts import run_target_facts
from core.models import RunRequest, Workload
from core.models.ids import body_hash, comparison_key, new_run_id, run_id_for_key, step_id
from core.models.locks import TargetLock, Waiter
from core.models.planned import PlannedStep
from core.models.state import DeliveryState, RunState
from core.models.stored import Delivery, Requester, Run, Step
from core.ports import Store
from core.runs.admission import Admission, TargetBusy, lock_keys, run_keys, target_of
from core.runs.cas import Contended
from core.runs.commit import (
    ANSWER_MS,
    DECIDE_GRACE_MS,
    Abandoned,
    Answer,
    accept_by_s,
    in_time,
    late,
)
from core.runs.guardrails import (
    LOCAL_CALLER,
    Caller,
    TargetInfo,
    check_run,
    datasets_for,
    unknown_targets,
)
from core.runs.lifecycle import Lifecycle
from core.runs.plan import plan_steps
from core.runs.sending import STEP_OUT
from core.timestamps import iso_ms
from core.validation import parse

log = logging.getLogger(__name__)
# Each write lost means another request with the same Idempotency-Key wrote the run meanwhile.
COMMIT_ATTEMPTS = 8


class IdempotencyMismatch(Conflict):
    pass


@dataclass(frozen=True)
class _Plan:
    """A request checked: valid, allowed, and planned into steps."""

    request: RunRequest
    profile: Profile | None
    base: Workload
    specs: list[PlannedStep]
    fill: bool


@dataclass(frozen=True)
class _Attempt:
    """This request's making of the run: what its document is written from."""

    plan: _Plan
    me: Waiter
    caller: Caller
    answer: Answer
    digest: str
    idempotency_key: str | None
    traceparent: str | None
    nonce: str = field(default_factory=lambda: uuid.uuid4().hex)  # Run.attempt


@dataclass(frozen=True)
class _Revive:
    """A void run under this Idempotency-Key: its document is written over."""

    void: Run


class Intake:
    def __init__(
        self,
        store: Store,
        admission: Admission,
        lifecycle: Lifecycle,
        *,
        pools: tuple[str, ...] = ("default",),
        targets: list[TargetInfo] | None = None,
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
        answer: Answer | None = None,
        traceparent: str | None = None,
    ) -> tuple[Run, bool]:
        """Validate, check the caller's limits, admit, record and send a run's first step.
        Returns (run, created). ``answer``: the request's (the HTTP handler answers 503 at
        its deadline); by default one of ANSWER_MS from now.

        One run at a time per target: when another run holds it, the run waits in line
        (state ``waiting``) or, with ``on_busy: refuse``, is refused with TargetBusy and
        nothing is written."""
        plan = self._check(body, caller)
        if answer is None:
            answer = Answer(self.life.now_ms() + ANSWER_MS, self.life.clock)
        run_id = run_id_for_key(idempotency_key) if idempotency_key else new_run_id()
        digest = body_hash(body)
        revive: _Revive | None = None
        if idempotency_key:
            replay = self._replay(run_id, digest, answer)
            if isinstance(replay, Run):
                return replay, False
            revive = replay
        answer.check()
        me = Waiter(run_id=run_id, created_ms=self.life.now_ms())
        # The intake span's trace is the run's (core.telemetry).
        attempt = _Attempt(plan, me, caller, answer, digest, idempotency_key, traceparent)
        stored, created = self._commit(attempt, revive)  # the commit point
        if not created:
            return stored, False
        if not in_time(stored) or not answer.commit(stored, created=True):
            self._void(stored)
            raise Abandoned("the database did not confirm the run in time", "Cosmos DB")
        # Committed: the answer is 202 whatever follows (the timer finishes what does not).
        return self._start(stored, answer), True

    def _check(self, body: Any, caller: Caller) -> _Plan:
        """The request, valid and allowed, and its steps; ValidationFailed naming each field
        otherwise (nothing is written before this)."""
        request = parse(RunRequest, body)
        profile, errors = self._profile(request)
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
                clients=max(s.clients for s in specs),
            )
            if fleet_errors:
                raise ValidationFailed(fleet_errors)
        return _Plan(request, profile, base, specs, fill)

    def _profile(self, request: RunRequest) -> tuple[Profile | None, list[FieldError]]:
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
        return profile, errors

    def _create_steps(self, run_id: str, specs: list[PlannedStep]) -> None:
        for spec in specs:
            try:
                self.store.items.create_step(
                    Step(id=step_id(run_id, spec.step), run_id=run_id, **spec.model_dump())
                )
            except Conflict:
                pass  # a replay after a crash before the run was written

    def _new_run(
        self, plan: _Plan, me: Waiter, admitted: bool, caller: Caller, answer: Answer
    ) -> Run:
        request, profile, base, specs = plan.request, plan.profile, plan.base, plan.specs
        targets = request.all_targets
        resolved = base.model_dump(mode="json")
        return Run(
            id=me.run_id,
            created_at=iso_ms(me.created_ms),
            created_ms=me.created_ms,
            request=request,
            engine=request.engine,
            profile=profile.name if profile else None,
            profile_version=profile.version if profile else None,
            workload=base,
            comparison_key=comparison_key(request.engine, resolved, targets, request.clients),
            fill=plan.fill,
            files_per_target=profile.files_per_target if profile else 1,
            cooldown_s=profile.cooldown_s if profile else 0,
            target=targets[0],
            targets=targets,
            target_facts=run_target_facts(request.pool, targets, self.targets),
            datasets=datasets_for(request, self.targets),
            pool=request.pool,
            tags=request.tags,
            step_count=len(specs),
            items_total=sum(s.clients for s in specs),
            state=RunState.QUEUED if admitted else RunState.WAITING,
            admitted=admitted,
            delivery=Delivery(state=DeliveryState.PENDING if admitted else DeliveryState.WAITING),
            requested_by=Requester(**caller.as_doc()),
            body_hash="",  # ``submit`` sets it, the key and the trace
            accept_by_s=accept_by_s(answer.deadline_ms),
            # Should this call not finish (a crash), the timer decides and sends it.
            due_ms=me.created_ms + DECIDE_GRACE_MS,
        )

    def _prepare(self, a: _Attempt, generation: int) -> Run:
        """Admit the run (its target locks, marked with this attempt's generation, or its
        place in line) and create its steps: its document, to be written next."""
        request = a.plan.request
        keys = lock_keys(request.pool, request.all_targets)
        admitted = self._admit_or_wait(keys, a.me, request.on_busy, generation)
        self._create_steps(a.me.run_id, a.plan.specs)
        a.answer.check()
        run = self._new_run(a.plan, a.me, admitted, a.caller, a.answer)
        run.body_hash, run.idempotency_key, run.traceparent = (
            a.digest,
            a.idempotency_key,
            a.traceparent,
        )
        run.generation, run.attempt = generation, a.nonce
        return run

    def _commit(self, a: _Attempt, revive: _Revive | None) -> tuple[Run, bool]:
        """Store the run document: (the run as stored, True), or (the run another request
        with the same Idempotency-Key stored first, False). Requests with one key converge:
        one that loses the write reads the run again and answers with it, or writes over it
        once more while it is void (that request's revival came too late, or was voided
        meanwhile: 40 POSTs on 30 keys through 3 instances answered 409 "changed
        concurrently" when a second write over the void run was lost too). A document that
        keeps changing is a 503 the caller retries, never a 409 for the same body.

        A revival is the void run's next generation: its locks are taken (or taken over)
        for that generation before it is written, again when it must write over a later
        void generation (core.runs.admission)."""
        run: Run | None = None
        for attempt in range(COMMIT_ATTEMPTS):
            if attempt:
                a.answer.check()  # answered 503 meanwhile: nothing more is written
            generation = revive.void.generation + 1 if revive else 0
            if run is None or run.generation != generation:
                before, run = run, self._prepare(a, generation)
                if before is not None and before.admitted and not run.admitted:
                    self.admission.release(before)  # unless taken over since
            try:
                return self._store(run, revive), True
            except Conflict:  # a request with the same Idempotency-Key wrote it first
                replay = self._replay(run.id, a.digest, a.answer)
            if isinstance(replay, Run):
                return replay, False
            revive = replay  # void, or gone: this request makes it anew, as a retry would
            time.sleep(random.uniform(0, 0.005 * (attempt + 1)))  # jitter, as cas.update
        raise Contended(f"run {a.me.run_id} kept changing under us")

    def _store(self, run: Run, revive: _Revive | None) -> Run:
        """Write the run document: the commit point (over the void run it revives)."""
        try:
            if revive is None:
                return self.store.runs.create(run)
            run.etag = revive.void.etag
            return self.store.runs.replace(run)
        except StoreUnavailable:
            self._void_unknown(run)  # if it was stored after all
            raise

    def _start(self, stored: Run, answer: Answer) -> Run:
        """Its creator accepts it and sends its first step (core.runs.lifecycle), or it
        waits in line; what does not happen here, the timer does. The answer hears when the
        first step's messages are all out (its POST may be answered then)."""
        try:
            if stored.admitted:
                token = STEP_OUT.set(answer.enqueued)
                try:
                    return self.life.deliver(stored, creator=True)
                finally:
                    STEP_OUT.reset(token)
            self._in_line(stored)
            return self.life.accept(stored)
        except StoreUnavailable as e:
            log.warning("run %s: stored; the timer will send it: %s", stored.id, e)
        except Exception:
            log.exception("run %s: stored; the timer will send it", stored.id)
        return stored

    def _void_unknown(self, run: Run) -> None:
        """This request's write got no answer: void its attempt if it landed. Not a twin's
        attempt of the same generation that landed instead (its twin may have answered 202
        for it): the write read back must be this request's. Best effort: a write applied
        later is void by its timestamp."""
        try:
            stored = self.store.runs.get(run.id)
        except NotFound:
            return
        except StoreUnavailable as e:
            log.warning("run %s: could not void its unconfirmed creation: %s", run.id, e)
            return
        if stored.attempt == run.attempt:
            self._void(stored)

    def _void(self, run: Run) -> None:
        try:
            self.life.void(run.id, run.generation, read=run)
        except (StoreUnavailable, Conflict) as e:  # void by its timestamp, or by the timer
            log.warning("run %s: could not void its late creation: %s", run.id, e)

    def _replay(self, run_id: str, digest: str, answer: Answer) -> Run | _Revive | None:
        """The run an Idempotency-Key already made, if any (a different body is refused).
        A replay finishes a delivery its first call left undone; a void run (its first
        call was answered 503) is made anew (``_Revive``)."""
        try:
            run = self.store.runs.get(run_id)
        except NotFound:
            return None
        if run.body_hash != digest:
            raise IdempotencyMismatch(
                "Idempotency-Key was already used with a different request body"
            )
        if late(run):
            run = self.life.void(run.id, run.generation, read=run)
        if run.accepted is None:
            # Its first call's answer is unknown here: this call answers for it.
            if not answer.commit(run, created=False):
                raise Abandoned("the request was answered before its run was confirmed")
            run = self.life.accept(run)
        if run.void:
            return _Revive(run)
        if run.admitted and run.delivery.state == DeliveryState.PENDING:
            run = self.life.deliver(run)
        elif not run.admitted and not run.finished:
            self._in_line(run)
        return run

    def _in_line(self, run: Run) -> None:
        """A waiting run is in its targets' queues (idempotent). Its join before the commit
        point may have found the run's entry of a void attempt under the same
        Idempotency-Key, which others then dropped as dead: without this the run waited
        in no queue, and nothing ever admitted it."""
        self.admission.wait(run_keys(run), Waiter(run_id=run.id, created_ms=run.created_ms))

    def _admit_or_wait(self, keys: list[str], me: Waiter, on_busy: str, generation: int) -> bool:
        """Take the run's target locks now if nobody holds them or waits for them; else
        join their queues, or refuse."""
        seen: dict[str, TargetLock] = {}  # the locks busy() read, for the change that follows
        busy = self.admission.busy(keys, me, seen)
        if busy is None and self.admission.try_acquire(keys, me, seen, generation=generation):
            return True
        if on_busy == "refuse":
            who = f"run {busy.holder}" if busy and busy.holder else "another run"
            waiting = f"; {busy.waiting} waiting" if busy and busy.waiting else ""
            target = target_of(busy.key if busy else keys[0])
            raise TargetBusy(f"target {target} is busy with {who}{waiting}")
        self.admission.wait(keys, me, seen)
        return False
