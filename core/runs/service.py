"""The run service as the API, the timers, the scheduler and the bot see it: intake,
views, cancellation and the agents' protocol, composed over one store, queue and artifact
store (each part in its own module; this one only wires them and delegates)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from core import telemetry
from core.errors import StoreUnavailable
from core.fleet.pools import PoolConfig
from core.fleet.service import Fleet
from core.models.state import FINISHED_RUN
from core.models.stored import Run
from core.models.views import RunSummary
from core.ports import Artifacts, Queue, Store
from core.runs.admission import Admission
from core.runs.agent_reports import AgentReports
from core.runs.barrier_timing import BARRIER_LEAD_MS, REJOIN_LATE_MS
from core.runs.clean import CleanOrdered, order_clean
from core.runs.commit import Answer
from core.runs.guardrails import LOCAL_CALLER, Caller, TargetInfo
from core.runs.intake import Intake
from core.runs.lifecycle import Lifecycle
from core.runs.ownership import check_owner
from core.runs.protocol import AgentProtocol
from core.runs.recorder import RunRecorder
from core.runs.timer import Timer
from core.runs.views import Views, public_run


class RunService:
    def __init__(
        self,
        store: Store,
        queue: Queue,
        artifacts: Artifacts,
        *,
        max_deliveries: int = 5,
        pools: tuple[str, ...] = ("default",),
        barrier_lead_ms: int = BARRIER_LEAD_MS,
        rejoin_late_ms: int = REJOIN_LATE_MS,
        clock: Callable[[], float] = time.time,
        monitor: RunRecorder | None = None,
        targets: list[TargetInfo] | None = None,
        on_finished: Callable[[Run], object] | None = None,
        pool_configs: tuple[PoolConfig, ...] = (),
    ) -> None:
        self.store = store
        self.queue = queue
        self.targets = list(targets or [])
        self.fleet = Fleet(store.agents, pool_configs or [PoolConfig(name=p) for p in pools], clock)
        self.admission = Admission(store, clock)
        self.lifecycle = Lifecycle(
            store,
            queue,
            artifacts,
            self.admission,
            clock=clock,
            monitor=monitor,
            on_finished=on_finished,
        )
        self.lifecycle.pool_shortfall = self.fleet.waiting
        self.timer = Timer(self.lifecycle)  # elastic pools grow before a step is sent
        self.intake = Intake(
            store, self.admission, self.lifecycle, pools=pools, targets=targets, fleet=self.fleet
        )
        self.protocol = AgentProtocol(
            self.lifecycle,
            max_deliveries=max_deliveries,
            barrier_lead_ms=barrier_lead_ms,
            rejoin_late_ms=rejoin_late_ms,
        )
        self.views = Views(store, self.admission, self.lifecycle, self.fleet.price_of)
        # The agents' protocol, as the API's agent routes call it.
        self.claim = self.protocol.claim
        self.ready = self.protocol.ready
        self.barrier = self.protocol.barrier
        self.agent_reports = AgentReports(self.lifecycle)
        self.heartbeat = self.agent_reports.heartbeat
        self.report_failure = self.agent_reports.report_failure
        self.report_cancelled = self.agent_reports.report_cancelled
        self.put_artifact = self.agent_reports.put_artifact
        self.store_result = self.agent_reports.store_result
        # Reads.
        self.get_run = self.views.get_run
        self.list_runs = self.views.list_runs
        self.curves = self.views.curves
        self.full_result = self.views.full_result

    def submit(
        self,
        body: Any,
        idempotency_key: str | None = None,
        caller: Caller = LOCAL_CALLER,
        answer: Answer | None = None,
    ) -> tuple[RunSummary, bool]:
        with telemetry.span("intake") as span:  # the run's trace starts here
            run, created = self.intake.submit(
                body, idempotency_key, caller, answer, span.traceparent
            )
            span.set("run_id", run.id)
            span.set("pool", run.pool)
        try:
            return self.views.summary(run), created
        except StoreUnavailable:  # stored and committed: 202 without its place in line
            return public_run(run), created

    def cancel(self, run_id: str, caller: Caller = LOCAL_CALLER) -> RunSummary:
        """Queued items are marked cancelled now and dropped by whichever agent receives
        them; held items are stopped at the agent's next heartbeat. Runners cancel their
        own runs; engineers and admins any."""
        run = self.store.runs.get(run_id)
        check_owner(caller, run.owner, "requested_by.name", f"run {run_id}")
        if run.state in FINISHED_RUN:
            return self.views.summary(run)

        now = self.lifecycle.now_ms()

        def cancel(r: Run) -> bool | None:
            # Decided again on the fresh document: a run that finished meanwhile stays so.
            if r.cancel_requested or r.state in FINISHED_RUN:
                return False
            r.cancel_requested = True
            # Should this call not get to the end (a crash, an outage), the timer does.
            r.due_ms = min(r.due_ms or now, now)
            return None

        run = self.lifecycle.update_run(run_id, cancel)
        if run.state in FINISHED_RUN:
            return self.views.summary(run)
        if not run.admitted:
            self.admission.leave(run)
        _, items = self.store.items.of_run(run_id)
        for item in items:
            if not item.ended and not item.cancel_requested:
                # Decided again on the fresh document (Item.cancel): a queued item ends, a
                # held one is marked for its agent's next heartbeat, which reads only it.
                self.lifecycle.update_item(run_id, item.id, lambda d: None if d.cancel() else False)
        return self.views.summary(self.lifecycle.advance(run_id))

    def clean(self, alias: str, pool: str | None, caller: Caller = LOCAL_CALLER) -> CleanOrdered:
        """Have an agent of the target's pool remove its benchmark files (core.runs.clean)."""
        order = order_clean(
            self.store,
            self.queue,
            self.targets,
            alias,
            pool,
            caller.name,
            now_ms=self.lifecycle.now_ms(),
        )
        return CleanOrdered(**dict(order), state="queued")

    def tick(self) -> list[str]:
        """The timer: whatever is due. Returns the runs finalized."""
        return self.timer.tick()
