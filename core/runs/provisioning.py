"""Holding a run's step while its elastic pool grows (core.fleet.scaling), pure: the change
``core.runs.lifecycle`` writes on the run. The run shows state ``provisioning`` with the
reason and the agents still missing, and the timer looks again every second; after
PROVISION_TIMEOUT_S the step fails, saying so (for the first step, its delivery too)."""

from __future__ import annotations

from core.errors import BenchError
from core.fleet.scaling import PROVISION_TIMEOUT_S, Waiting
from core.models.state import FINISHED_RUN, DeliveryState, RunState
from core.models.stored import Provisioning, Run
from core.runs.delivery import Change, Outcome

PROVISION_RECHECK_MS = 1_000


class AwaitingAgents(BenchError):
    """The step cannot be sent yet: its pool has fewer live agents than it needs."""

    def __init__(self, waiting: Waiting) -> None:
        super().__init__(f"{waiting.missing} agents still missing")
        self.waiting = waiting


def holding(step: int, waiting: Waiting, now_ms: int, outcome: Outcome) -> Change:
    """Record that ``step`` waits for agents; give up after PROVISION_TIMEOUT_S
    (``outcome.gave_up``: ``provisioning`` None, ``error`` set and, for the first step, its
    delivery failed). A run that finished meanwhile (cancelled), or whose first step a
    racing call sent, is left as it is."""

    def change(r: Run) -> bool | None:
        outcome.gave_up = False
        if r.state in FINISHED_RUN or (step == 0 and r.delivery.state != DeliveryState.PENDING):
            return False
        p = r.provisioning
        since = p.since_ms if p is not None and p.step == step else now_ms
        reason = waiting.reason(r.pool)
        if now_ms - since > PROVISION_TIMEOUT_S * 1000:
            outcome.gave_up = True
            r.provisioning = None
            r.error = f"{reason} after {PROVISION_TIMEOUT_S} s: gave up"
            if step == 0:
                r.delivery.move(DeliveryState.FAILED)
                r.delivery.last_error = r.error
            r.due_ms = now_ms
            return None
        r.provisioning = Provisioning(
            since_ms=since,
            step=step,
            needed=waiting.needed,
            live=waiting.live,
            missing=waiting.missing,
            reason=reason,
        )
        r.move(RunState.PROVISIONING)
        r.due_ms = now_ms + PROVISION_RECHECK_MS
        return None

    return change
