"""The regression gate's verdict on a run, as the run keeps it (``gate`` in GET
/api/runs/{id}) and the monitor stores it with each series point. How it is reached is
core.analysis.gate; these are the stored shapes, below every layer that reads them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Verdict = Literal["pass", "regression", "improvement", "not-enough-history"]


class GateRule(BaseModel):
    """The gate's thresholds, as a run was judged with them."""

    pct: float = Field(10.0, description="the band's floor, percent of the reference median")
    sigmas: float = Field(3.0, description="the band in reference standard deviations")
    min_points: int = Field(5, description="fewer reference points: not enough history")
    max_points: int = Field(20, description="the latest this many reference points")


class Reference(BaseModel):
    points: int = Field(description="reference points used")
    median: float | None
    sd: float | None = Field(description="1.4826 x the median absolute deviation")
    first_run_id: str | None = Field(None, description="oldest reference point's run")
    last_run_id: str | None = Field(None, description="newest reference point's run")
    since_run_id: str | None = Field(
        None, description="the reference starts at this run: a change triaged expected"
    )


class ChangePointRef(BaseModel):
    """A change point attributed to this run (it is the first run after the change)."""

    change_pct: float
    pvalue: float | None
    before_mean: float
    after_mean: float


class KeptVerdict(BaseModel):
    """One metric's verdict as a series point keeps it (``StepPoint.gate``): the history
    shows it and the gate's rule 1 reads it. Points judged before the gate kept its
    reference have none; points of the first, single-run gate hold ``no-baseline`` or
    ``{verdict, value, change_pct, baseline_mean, baseline_points}``, served as stored
    (hence the extra fields allowed)."""

    model_config = ConfigDict(extra="allow")
    verdict: Verdict | Literal["no-baseline"]
    value: float | None = None
    reference: Reference | None = None
    change_pct: float | None = Field(None, description="(value - reference median) / median, %")
    band_pct: float | None = Field(None, description="max(pct, sigmas x sd / median), percent")
    change_point: ChangePointRef | None = None
    follows: str | None = Field(None, description="bandwidth: the IOPS metric it follows")
    regression_id: str | None = Field(None, description="the stored regression it counts in")
    why: str = ""


class MetricVerdict(BaseModel):
    step: int
    series_key: str
    metric: str = Field(description="direction.metric, e.g. read.iops")
    verdict: Verdict
    value: float
    reference: Reference
    change_pct: float | None = Field(description="(value - reference median) / median, %")
    band_pct: float | None = Field(description="max(pct, sigmas x sd / median), percent")
    change_point: ChangePointRef | None = None
    follows: str | None = Field(None, description="bandwidth: the IOPS metric it follows")
    regression_id: str | None = Field(None, description="the stored regression it counts in")
    why: str

    def kept(self) -> KeptVerdict:
        """What the series point keeps (its step, series and metric are the point's own)."""
        return KeptVerdict.model_validate(self.model_dump(exclude={"step", "series_key", "metric"}))


class RunGate(BaseModel):
    verdict: Verdict
    rule: GateRule
    metrics: list[MetricVerdict]


class Accepted(BaseModel):
    """A change on a metric triaged ``expected``: the new level is the norm from its first
    run on; points judged before ``accepted_ms`` were judged against the old level."""

    metric: str
    first_run_id: str
    first_time_ms: int
    accepted_ms: int
