"""What a run records about its targets when it is submitted (core.limits.facts
.run_target_facts builds it; ``Run.target_facts`` keeps it): each target's facts and
declared limits as the registry gave them then, and the limits they gave under that
catalogue version, so a later change of the registry or the catalogue does not change how
an old run is explained (core.analysis.ceilings) or fingerprinted (core.analysis.series)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from core.models.document import JsonObject


class RecordedLimit(BaseModel):
    """One limit of a target (core.limits.targets.Limit) as the run recorded it."""

    model_config = ConfigDict(frozen=True)

    metric: Literal["bw_bytes", "iops"]
    direction: Literal["read", "write", "total"]
    value: int | float  # as the catalogue computed it
    rule: str
    source: dict[str, str] | None  # the document it was read from; None: declared


class RecordedTarget(BaseModel):
    model_config = ConfigDict(frozen=True)

    alias: str
    # The registry's entry as it stood (core.limits.facts: TargetFacts, DeclaredLimits),
    # kept as given: a snapshot, read back only for ``kind`` and the declared switches.
    facts: JsonObject | None
    declared: JsonObject | None
    limits: list[RecordedLimit]

    def fact(self, name: str) -> object:
        return (self.facts or {}).get(name)


class RunTargetFacts(BaseModel):
    model_config = ConfigDict(frozen=True)

    catalogue_version: str
    targets: list[RecordedTarget]
