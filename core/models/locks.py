"""The target lock documents admission keeps (core.runs.admission): one per (pool, target),
naming the run that holds it and the runs waiting for it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from core.models.stored import _Stored


class Waiter(BaseModel):
    model_config = ConfigDict(extra="ignore")
    run_id: str
    created_ms: int

    @property
    def order(self) -> tuple[int, str]:
        return (self.created_ms, self.run_id)


class TargetLock(_Stored):
    """One target of one pool: which run holds it and which wait for it, in submission
    order (one document, so admission reads this target only)."""

    id: str  # "<pool>:<target>"
    run_id: str | None = None  # the holder
    since_ms: int = 0
    # The holder's attempt (Run.generation): a lock marked later than the holder's document
    # is a revival's, its document not written yet (core.runs.admission).
    generation: int = 0
    queue: list[Waiter] = Field(default_factory=list)
