"""Agent pools as the service is configured with them (``BENCH_POOLS``).

Each comma-separated entry is a pool name with optional ``:key=value`` settings::

    BENCH_POOLS=default,anf:size=12:price=2.016,burst:max=8:min=0:idle=900:price=2.016

- ``size``: a fixed pool's number of client VMs (its scale set's capacity): the most clients
  a run may ask for, even while some of them are restarting.
- ``max`` (elastic): the service raises the pool's capacity up to ``max`` when runs need
  more agents than are live and lowers it back to ``min`` (default 0) after ``idle``
  seconds without work (default 900).
- ``vmss`` (Azure, elastic): the name of the pool's agent scale set (the deployment sets it).
- ``price``: the hourly price of one client VM (list price, in the account's currency),
  used to turn client VM time into cost.

A bare name (``default``) declares nothing: its size is what its live agents say.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.models import POOL_PATTERN
from core.validation import field_errors

DEFAULT_IDLE_S = 900  # 15 minutes of no work before an elastic pool shrinks


class PoolConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=POOL_PATTERN)
    size: int | None = Field(None, ge=1, le=1000, description="fixed pool: its VM count")
    max: int | None = Field(None, ge=1, le=1000, description="elastic pool: its largest size")
    min: int = Field(0, ge=0, le=1000, description="elastic pool: the size it returns to")
    idle: float = Field(DEFAULT_IDLE_S, gt=0, le=7 * 86400, description="seconds before shrinking")
    price: float | None = Field(None, ge=0, le=10_000, description="per client VM and hour")
    vmss: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
        description="in Azure: the agents' scale set whose capacity an elastic pool sets",
    )

    @model_validator(mode="after")
    def _consistent(self) -> PoolConfig:
        if self.size is not None and self.max is not None:
            raise ValueError("a pool is fixed (size) or elastic (max), not both")
        if self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self

    @property
    def elastic(self) -> bool:
        return self.max is not None

    @property
    def declared_size(self) -> int | None:
        """The most agents the pool can ever provide, when the configuration says."""
        return self.max if self.max is not None else self.size


def parse_pools(text: str) -> tuple[PoolConfig, ...]:
    """``BENCH_POOLS`` into pool configurations; ValueError naming the entry and field."""
    pools: list[PoolConfig] = []
    for entry in filter(None, (e.strip() for e in text.split(","))):
        name, *settings = entry.split(":")
        fields: dict[str, str] = {"name": name.strip()}
        for setting in settings:
            key, sep, value = setting.partition("=")
            if not sep or key.strip() in fields:
                raise ValueError(f"BENCH_POOLS: {entry!r}: {setting!r} is not KEY=VALUE")
            fields[key.strip()] = value.strip()
        try:
            pools.append(PoolConfig.model_validate(fields))
        except ValidationError as e:
            why = "; ".join(
                f.message if f.field == "(body)" else f"{f.field}: {f.message}"
                for f in field_errors(e.errors())
            )
            raise ValueError(f"BENCH_POOLS: {entry!r}: {why}") from None
    names = [p.name for p in pools]
    if len(set(names)) != len(names):
        raise ValueError(f"BENCH_POOLS: a pool is listed twice ({', '.join(names)})")
    return tuple(pools) or (PoolConfig(name="default"),)
