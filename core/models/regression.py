"""Changes found in a series and the regressions stored from them (container
``regressions``, partition ``series_key``), with their triage and notification.

Two methods find them: change-point detection (``e-divisive``: before and after are the
means and standard deviations of the two sides) and the regression gate (``gate``: before
is the reference's median and robust sd, after the run's value)."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from core.models.document import StoredDoc

TriageState = Literal["new", "acknowledged", "expected", "fixed"]
TRIAGE_STATES: tuple[TriageState, ...] = get_args(TriageState)
OPEN_STATES: tuple[TriageState, ...] = ("new", "acknowledged")  # still to fix or accept
ChangeKind = Literal["regression", "improvement"]
ChangeMethod = Literal["e-divisive", "gate"]


class MeanStd(BaseModel):
    mean: float
    std: float


class MedianSd(BaseModel):
    """The gate's reference (core.analysis.gate, rule 3)."""

    median: float | None
    sd: float | None


class Change(BaseModel):
    """A change of one metric, with the evidence a person needs."""

    model_config = ConfigDict(extra="ignore")
    metric: str
    kind: ChangeKind
    method: ChangeMethod
    before: MeanStd | MedianSd
    after: MeanStd
    change_pct: float | None = None
    pvalue: float | None = None
    first_run_id: str = Field(description="the first run after the change")
    first_time_ms: int
    runs_around: list[str] = Field(default_factory=list)


class DeliveryRecord(BaseModel):
    """One channel's delivery of a notification (a webhook's URL is never kept: it carries
    its secret)."""

    channel: str
    ok: bool
    attempts: int | None = None
    status: int | None = None
    error: str | None = None


class Told(BaseModel):
    """Notified when stored: when, and how each channel took it."""

    at: str
    deliveries: list[DeliveryRecord]


class ToldWith(BaseModel):
    """Not notified on its own: told in the message of this regression (the same run)."""

    model_config = ConfigDict(validate_by_name=True, serialize_by_alias=True)
    with_: str = Field(alias="with")


class Regression(StoredDoc, Change):
    """A stored change: a regression or an improvement, in its triage state."""

    id: str = Field(description="<series_key>.<metric>.<method>.<first_run_id>")
    series_key: str
    target: str | None = None
    state: TriageState = "new"
    detected_at: str | None = None
    notified: Told | ToldWith | None = None
    triaged_at: str | None = None
    triaged_at_ms: int | None = None
