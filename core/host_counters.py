"""Summaries of a client host's counters while the engine measured, part of the result
contract (core.models.Result.counters); the per-second series is an artifact."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def _whole(value: object) -> object:
    # As core.models.common.whole (a layer above this one): 4.0 is the integer 4.
    return int(value) if type(value) is float and value.is_integer() else value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_Int = Annotated[int, BeforeValidator(_whole)]


class CpuSummary(_Strict):
    """Whole-host CPU over the measured period, percent of all CPUs.

    ``source`` says who measured it: the agent sampling /proc/stat each second (Linux), or
    DiskSpd's own ``<CpuUtilization>`` over its measured time (Windows), which has no
    per-second figure (no ``busy_pct_max``) and no iowait or steal (None: not measured,
    not zero)."""

    source: Literal["proc-stat", "diskspd"] = "proc-stat"
    busy_pct_mean: float = Field(ge=0, le=100)
    busy_pct_max: float | None = Field(None, ge=0, le=100)
    user_pct_mean: float = Field(ge=0, le=100)
    system_pct_mean: float = Field(ge=0, le=100)
    iowait_pct_mean: float | None = Field(None, ge=0, le=100)
    steal_pct_mean: float | None = Field(None, ge=0, le=100)
    busiest_cpu_pct: float | None = Field(
        None, ge=0, le=100, description="the busiest single CPU's use (DiskSpd's per-CPU rows)"
    )


class NetSummary(_Strict):
    """Bytes per second over every interface but loopback (from /proc/net/dev)."""

    rx_bytes_mean: float = Field(ge=0)
    rx_bytes_max: float = Field(ge=0)
    tx_bytes_mean: float = Field(ge=0)
    tx_bytes_max: float = Field(ge=0)


class NfsSummary(_Strict):
    """One NFS mount over the measured period, as nfsiostat reads /proc/self/mountstats."""

    mount_point: str
    ops_per_s: float = Field(ge=0)
    retrans: _Int = Field(ge=0, description="RPC transmissions beyond the first, in all")
    avg_rtt_ms: float = Field(ge=0, description="mean RPC round trip per operation")
    avg_exe_ms: float = Field(ge=0, description="mean execution time per operation")


class CountersSummary(_Strict):
    """The host's counters while the engine measured (the per-second series is the
    ``counters`` artifact), and the engine's own CPU figures."""

    seconds: _Int = Field(ge=0, description="one-second samples inside the measured period")
    cpu: CpuSummary | None = None
    net: NetSummary | None = None
    nfs: list[NfsSummary] = Field(default_factory=list)
    fio_usr_cpu_pct: float | None = Field(
        None, ge=0, description="fio's usr_cpu summed over its jobs (100 = one CPU)"
    )
    fio_sys_cpu_pct: float | None = Field(None, ge=0)
