"""What the lifecycle needs of the monitor, as a port: a finished run's aggregates added to
their series and judged by the regression gate, the run's verdict returned. The monitor
(core.monitoring.monitor.Monitor) sits above the runs and implements it; the lifecycle
names only this."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from core.models import Result, StepAggregate
from core.models.gate import RunGate
from core.models.stored import Run


class Judged(Protocol):
    @property
    def gate(self) -> RunGate: ...


class RunRecorder(Protocol):
    def record(
        self, run: Run, aggregates: Sequence[StepAggregate], results: Sequence[Result]
    ) -> Judged: ...
