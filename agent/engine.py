"""One interface for the engines an agent runs (fio, agent.fio_item; DiskSpd,
agent.diskspd_item): the worker (agent.worker) drives an item the same way whatever runs it.

    prepare  before the agent reports ready: lay out the files (fio also starts, held at
             its gate)
    start    at the step's common instant: the measured run begins
    poll     while it runs (the worker stops it when the run is cancelled or the lease lost)
    stop     on every way out: whatever still runs is stopped
    collect  after it ended: check the run and build the result and its artifacts

prepare and collect raise agent.layout.ItemFailed when the attempt fails (with whether it
failed for good); anything else they raise is reported by the worker (agent.failures).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from agent.lease import LiveSource
from core.models import ArtifactName, Result


@dataclass(frozen=True)
class Measured:
    """A run's result, before its artifacts are uploaded (the worker names them in it)."""

    result: Result
    artifacts: dict[ArtifactName, bytes]


class Engine(Protocol):
    @property
    def stage(self) -> str:
        """The name of the measured run's span (agent.tracing): "fio" or "diskspd"."""
        ...

    @property
    def work_dir(self) -> Path:
        """The item's work directory, removed once the result is stored."""
        ...

    def prepare(self) -> None: ...

    def start(self) -> LiveSource | None:
        """Returns what the item's heartbeat relays while the run goes on, if anything."""
        ...

    def poll(self) -> int | None:
        """The engine's exit status once it has ended, else None."""
        ...

    def stop(self) -> None: ...

    def collect(self, scheduled_ms: int) -> Measured: ...
