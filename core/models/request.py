"""A run request as callers send it, and the work item an agent takes off the queue."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)

from core.models.common import (
    ALIAS_PATTERN,
    ITEM_ID_PATTERN,
    MAX_CLIENTS,
    MAX_STEPS,
    MAX_TARGETS,
    POOL_PATTERN,
    RUN_ID_PATTERN,
    TAG_KEY_PATTERN,
    TRACEPARENT_PATTERN,
    Alias,
    Clients,
    Engine,
    Int,
    Iops,
    Strict,
)
from core.models.workload import DataSet, FieldSweep, GridSweep, RateSweep, Workload

# A sweep's bounds are in the document too (issue 24.5); x-error: core.validation's message.
ClientSweep = Annotated[
    list[Clients],
    Field(
        min_length=1,
        max_length=MAX_STEPS,
        json_schema_extra={"x-error": f"a sweep has 1 to {MAX_STEPS} steps"},
    ),
]
_COUNT: TypeAdapter[int] = TypeAdapter(Clients)
_CLIENT_SWEEP: TypeAdapter[list[int]] = TypeAdapter(ClientSweep)


def _count_or_sweep(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A list is a sweep, anything else a count: each validated alone, so an error says
    what is wrong with the one given, not why it is neither."""
    adapter: TypeAdapter[Any] = _CLIENT_SWEEP if isinstance(value, list) else _COUNT
    return adapter.validate_python(value, strict=True)


def _one_sweep(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """The sweep its keys name (grid; field and values; else rates), validated alone, for
    the same reason. Both are strict whoever validates the request: a validator's own
    validation does not inherit the caller's mode."""
    if isinstance(value, FieldSweep | GridSweep | RateSweep):
        return value
    keys = value if isinstance(value, dict) else {}
    kind = (
        GridSweep
        if "grid" in keys
        else FieldSweep
        if {"field", "values"} & set(keys)
        else RateSweep
    )
    return kind.model_validate(value, strict=True)


Sweep = Annotated[FieldSweep | GridSweep | RateSweep, WrapValidator(_one_sweep)]
ONE_TARGET = "give either target or targets, not both"
SOME_TARGET = "give target (one mount alias) or targets (several)"


class RunRequest(Strict):
    """Body of ``POST /api/runs``."""

    # Said in the schema too (issue 24.5: {"target": null, "targets": []} was valid there and
    # refused here). "x-error" is the message core.validation gives for a violation.
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        json_schema_extra={
            "if": {"required": ["target"], "properties": {"target": {"type": "string"}}},
            "then": {"properties": {"targets": {"maxItems": 0, "x-error": ONE_TARGET}}},
            "else": {
                "required": ["targets"],
                "properties": {"targets": {"minItems": 1, "x-error": SOME_TARGET}},
                "x-error": SOME_TARGET,
            },
        },
    )

    target: Alias | None = Field(None, description="the mount to load (or give targets)")
    targets: list[Alias] = Field(
        default_factory=list,
        max_length=MAX_TARGETS,
        validate_default=True,
        json_schema_extra={"uniqueItems": True},
        description="several mounts loaded at once by each client, one file per mount "
        "(like the 6 volumes per VM of the ANF scripts)",
    )
    pool: str = Field(
        "default", pattern=POOL_PATTERN, description="an agent pool name (lowercase, digits, -)"
    )
    engine: Engine = "fio"
    profile: str | None = Field(
        None, pattern=r"^[a-z0-9-]{1,64}$", description="a catalogue profile (GET /api/profiles)"
    )
    workload: Workload | None = Field(
        None, description="the workload, or the fields overriding the profile's"
    )
    fill: bool | None = Field(
        None, description="write the working set before measuring (default: the profile's)"
    )
    sweep: Sweep | None = None
    target_iops: Iops | None = Field(
        None,
        description="size concurrency by Little's law from a first 1-thread latency step",
    )
    repetitions: Int = Field(1, ge=1, le=10)
    discard_first: bool = Field(False, description="treat the first repetition as warm-up")
    clients: Annotated[Clients | ClientSweep, WrapValidator(_count_or_sweep)] = Field(
        1,
        description="distinct agents loading the target at once; a list sweeps it, one "
        "measured step per entry, run one after another",
    )
    barrier_timeout_s: Int = Field(
        120, ge=5, le=3_600, description="how long all clients of a step have to claim"
    )
    on_busy: Literal["wait", "refuse"] = Field(
        "wait",
        description="when another run holds the target: wait in line (position shown) or "
        "refuse with 409",
    )
    tags: dict[
        Annotated[str, Field(pattern=TAG_KEY_PATTERN)], Annotated[str, Field(max_length=256)]
    ] = Field(
        default_factory=dict,
        max_length=16,
        description="Short labels (commit, pipeline, ...): at most 16",
        # pydantic checks key patterns but does not export them; JSON Schema needs it said.
        json_schema_extra={"propertyNames": {"pattern": TAG_KEY_PATTERN}},
    )

    @field_validator("targets")
    @classmethod
    def _one_of_target_or_targets(cls, v: list[str], info: ValidationInfo) -> list[str]:
        single = info.data.get("target")
        if single is not None and v:
            raise ValueError(ONE_TARGET)
        if single is None and not v and "target" not in info.data:
            return v  # target itself was invalid: that error already names it
        if single is None and not v:
            raise ValueError(SOME_TARGET)
        if len(set(v)) != len(v):
            raise ValueError("must not repeat a mount alias")
        return v

    @field_validator("clients")
    @classmethod
    def _sweep_size(cls, v: int | list[int]) -> int | list[int]:
        if isinstance(v, list) and not 1 <= len(v) <= MAX_STEPS:
            raise ValueError(f"a sweep has 1 to {MAX_STEPS} steps")
        return v

    @property
    def all_targets(self) -> list[str]:
        return [self.target] if self.target else list(self.targets)

    @property
    def client_steps(self) -> list[int]:
        """The client counts, one group of steps each."""
        return list(self.clients) if isinstance(self.clients, list) else [self.clients]


class WorkItem(Strict):
    """Queue message: ids and the typed workload only (64 KiB is the queue's hard limit)."""

    v: Literal[1] = 1
    run_id: str = Field(pattern=RUN_ID_PATTERN)
    item_id: str = Field(pattern=ITEM_ID_PATTERN)
    step: Int = Field(ge=0, le=9_999)
    client: Int = Field(ge=0, le=MAX_CLIENTS - 1)
    clients: Int = Field(ge=1, le=MAX_CLIENTS)
    pool: str = Field(pattern=POOL_PATTERN)
    targets: list[Alias] = Field(min_length=1, max_length=MAX_TARGETS)
    engine: Engine
    workload: Workload
    barrier_timeout_s: Int = Field(120, ge=5, le=3_600)
    fill: bool = False
    files_per_target: Int = Field(1, ge=1, le=64)
    cooldown_s: Int = Field(
        0,
        ge=0,
        le=3_600,
        description="DiskSpd -C: seconds of load after the measured period, not measured, "
        "so every client is still loading while the others measure (the profile's)",
    )
    datasets: dict[Alias, DataSet] = Field(
        default_factory=dict,
        max_length=MAX_TARGETS,
        description="read-only targets: the prepared files to read there; the agent lays "
        "out, creates and writes nothing on these mounts",
        json_schema_extra={"propertyNames": {"pattern": ALIAS_PATTERN}},
    )
    traceparent: str | None = Field(
        None,
        pattern=TRACEPARENT_PATTERN,
        description="W3C trace context of the span that sent the message: the agent's spans "
        "join the run's trace under it",
    )

    @model_validator(mode="after")
    def _datasets_on_targets(self) -> WorkItem:
        stray = sorted(set(self.datasets) - set(self.targets))
        if stray:
            raise ValueError(f"datasets name mounts that are not targets: {', '.join(stray)}")
        return self
