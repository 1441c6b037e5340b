"""What a target is (its facts) or what it may do (declared limits), as the target registry
gives them, and the limits that follow (pure).

A registry entry may carry ``"limits": {"read_mibps": 40}`` (declared, e.g. a QoS setting or
a provisioned v2 share), ``"facts": {"kind": "anf", "service_level": "ultra", "quota_tib":
100, "large_volume": true}`` (the limits follow from the catalogue), or both: then every
limit applies and the one nearest to being reached is the one that explains a step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.limits.sources import CATALOGUE_VERSION
from core.limits.targets import (
    AZFILES_MAX_GIB,
    AZFILES_MIN_GIB,
    DISK_SKUS,
    MIB,
    Limit,
    anf_limits,
    azure_files_premium_limits,
    managed_disk_limits,
)
from core.models.target_facts import RecordedLimit, RecordedTarget, RunTargetFacts


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeclaredLimits(_Strict):
    """Limits stated by whoever registered the target, in MiB/s and IOPS."""

    read_mibps: float | None = Field(None, gt=0, le=10_000_000)
    write_mibps: float | None = Field(None, gt=0, le=10_000_000)
    total_mibps: float | None = Field(None, gt=0, le=10_000_000)
    iops: float | None = Field(None, gt=0, le=1_000_000_000)

    @model_validator(mode="after")
    def _some(self) -> DeclaredLimits:
        if all(v is None for v in self.model_dump().values()):
            raise ValueError("give at least one of read_mibps, write_mibps, total_mibps, iops")
        return self

    def limits(self) -> list[Limit]:
        out = []
        for direction, mibps in (
            ("read", self.read_mibps),
            ("write", self.write_mibps),
            ("total", self.total_mibps),
        ):
            if mibps is not None:
                rule = f"declared {direction}_mibps {mibps:g}"
                out.append(Limit("bw_bytes", direction, mibps * MIB, rule))  # type: ignore[arg-type]
        if self.iops is not None:
            out.append(Limit("iops", "total", self.iops, f"declared iops {self.iops:g}"))
        return out


class AnfFacts(_Strict):
    kind: Literal["anf"]
    service_level: Literal["standard", "premium", "ultra"]
    quota_tib: float = Field(gt=0, le=2048, description="the volume's quota in TiB")
    large_volume: bool = False


class AzureFilesPremiumFacts(_Strict):
    """A provisioned v1 (premium) share: its limits follow from its provisioned size."""

    kind: Literal["azure-files-premium"]
    provisioned_gib: int = Field(ge=AZFILES_MIN_GIB, le=AZFILES_MAX_GIB)
    metadata_caching: bool | None = Field(
        None,
        description="SMB metadata caching on the share (on/off): an infrastructure fact, so "
        "a series splits where it changes and compare shows its effect per operation",
    )


class ManagedDiskFacts(_Strict):
    kind: Literal["managed-disk"]
    sku: str = Field(description="a Premium SSD (P1-P80) or Standard HDD (S4-S80) size")

    @field_validator("sku")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in DISK_SKUS:
            raise ValueError(f"unknown disk size {v!r} (known: {', '.join(DISK_SKUS)})")
        return v


TargetFacts = Annotated[
    AnfFacts | AzureFilesPremiumFacts | ManagedDiskFacts, Field(discriminator="kind")
]


def facts_limits(facts: TargetFacts) -> list[Limit]:
    if isinstance(facts, AnfFacts):
        return anf_limits(facts.service_level, facts.quota_tib, facts.large_volume)
    if isinstance(facts, AzureFilesPremiumFacts):
        return azure_files_premium_limits(facts.provisioned_gib)
    return managed_disk_limits(facts.sku)


class HasLimits(Protocol):
    """A target registry entry (core.runs.guardrails.TargetInfo)."""

    @property
    def alias(self) -> str: ...
    @property
    def pool(self) -> str: ...
    @property
    def limits(self) -> DeclaredLimits | None: ...
    @property
    def facts(self) -> TargetFacts | None: ...


def target_limits(target: HasLimits) -> list[Limit]:
    found = facts_limits(target.facts) if target.facts is not None else []
    return found + (target.limits.limits() if target.limits is not None else [])


def run_target_facts(
    pool: str, aliases: Sequence[str], registry: Sequence[HasLimits]
) -> RunTargetFacts | None:
    """What the run records about its targets when it is submitted: the facts, the declared
    limits and the limits they give under this catalogue version, so that a later change of
    the registry or the catalogue does not change how an old run is explained. None when no
    target of the run declares anything."""
    known = {(t.pool, t.alias): t for t in registry}
    entries = []
    for alias in aliases:
        t = known.get((pool, alias))
        limits = target_limits(t) if t is not None else []
        entries.append(
            RecordedTarget(
                alias=alias,
                facts=t.facts.model_dump(mode="json") if t and t.facts else None,
                declared=t.limits.model_dump(mode="json", exclude_none=True)
                if t and t.limits
                else None,
                limits=[RecordedLimit.model_validate(lim.as_doc()) for lim in limits],
            )
        )
    if not any(e.limits for e in entries):
        return None
    return RunTargetFacts(catalogue_version=CATALOGUE_VERSION, targets=entries)
