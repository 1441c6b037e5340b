"""A client's result as the agent reports it and the service stores it."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from core.host_counters import CountersSummary
from core.models.common import ITEM_ID_PATTERN, RUN_ID_PATTERN, Engine, Int, Strict
from core.models.workload import Workload

Direction = Literal["read", "write"]
# fio's own JSON (its output, or a part of it such as a job's steady-state verdict) kept as
# fio wrote it: the parsing edge (core.engines.fio_output reads it into models).
FioJson = dict[str, Any]


class LatencyStats(Strict):
    min: float
    max: float
    mean: float
    stddev: float


class DirectionResult(Strict):
    """One direction of one client's result, in fio's units (ns, bytes).

    Latency comes in fio's three kinds: total (``lat``: from submission to completion, what
    the application waits for), submission (``slat``) and completion (``clat``: from
    submission to completion by the device or server). DiskSpd measures one latency, from
    issue to completion, which is total latency; it is kept in both."""

    io_bytes: Int = Field(ge=0)
    total_ios: Int = Field(ge=0)
    runtime_ms: Int = Field(ge=0)
    iops: float = Field(ge=0)
    bw_bytes: float = Field(ge=0, description="Bytes per second")
    lat_ns: LatencyStats = Field(description="total latency: submission + completion")
    slat_ns: LatencyStats | None = Field(
        None, description="submission latency; none where fio records none (sync engines)"
    )
    clat_ns: LatencyStats = Field(description="completion latency")
    clat_percentiles_ns: dict[str, float] = Field(
        description="fio's completion-latency percentiles, key '99.900000'"
    )
    clat_bins_ns: dict[str, Int] = Field(
        description="fio json+ completion-latency histogram: bucket value -> count"
    )
    lat_percentiles_ns: dict[str, float] = Field(
        default_factory=dict,
        description="fio's total-latency percentiles (lat_percentiles=1), key '99.900000'",
    )
    lat_bins_ns: dict[str, Int] = Field(
        default_factory=dict,
        description="fio json+ total-latency histogram: bucket value -> count",
    )


class SeriesPoint(Strict):
    """One second of one client: t is the Unix second the sample interval ended in."""

    t: int
    iops: float = Field(ge=0)
    bw_bytes: float = Field(ge=0)


class HostFacts(Strict):
    hostname: str
    kernel: str
    os: str
    cpu_count: Int
    vm_size: str | None = None
    region: str | None = None


class MountFacts(Strict):
    alias: str
    path: str
    mount_point: str
    fstype: str
    options: str
    source: str


class FillInfo(Strict):
    ran: bool = Field(description="False when a valid fill marker was found")
    seconds: float
    marker: str


class StartInfo(Strict):
    """When this client was told to start and when it did: the start skew it saw."""

    scheduled_ms: Int = Field(description="the step's common start instant, Unix ms")
    released_ms: float = Field(
        description="when this agent released fio's jobs (its start FIFO), Unix ms"
    )
    skew_ms: float = Field(
        description="fio's measured start (its first 1 s log line minus 1 s) minus scheduled"
    )


ARTIFACT_NAMES = ("timeline", "raw", "logs", "counters")
ArtifactName = Literal["timeline", "raw", "logs", "counters"]


class ArtifactRef(Strict):
    """A large output kept in Blob Storage beside the result (a Cosmos DB document is at
    most 2 MB): the per-second timeline with histogram rows, the engine's own output, the
    raw logs. Stored gzip-compressed."""

    name: ArtifactName
    bytes: Int = Field(ge=0, description="compressed size")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


# A timeline packed to at most this is carried in its result (``Result.inline_timeline``),
# not uploaded: 3 s of real fio with its histogram lines packs to ~7 KB, a simulated
# client's to ~150 bytes, and at 1,000 clients the finalizer's reads of 1,000 blobs were
# 5 s after the last result, their uploads a quarter of the results' burst (issue 29.2).
# A longer run's goes to Blob Storage: every read of a run's results (a running run's view
# too) carries the timelines they carry.
INLINE_TIMELINE_BYTES = 8 << 10
# What a carried timeline may unpack to (the agent carries none that unpacks to more): a
# JSON timeline packs ~5-20 times, and 8 KiB of gzip could unpack to ~8 MB for the API.
INLINE_TIMELINE_UNPACKED_BYTES = 1 << 20

# Base64 text, checked as such: what agents send is parsed strictly, and strict parsing
# takes no text for a bytes field.
BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
InlineBase64 = Annotated[str, Field(max_length=4 * -(-INLINE_TIMELINE_BYTES // 3), pattern=BASE64)]

# Each of a result's other artifacts (the engine's output, its logs, its counters) that
# packs to at most this is carried in the result too (``Result.inline_artifacts``, agent
# protocol 4): the API puts it in Blob Storage itself, in the result's request. At 1,000
# simulated clients their two uploads were two of each client's three requests in the
# results' burst (issue 29.2); 3 s of real fio packs its output to ~4.5 KB and its logs
# to ~11 KB. A longer run's are uploaded, as before.
INLINE_ARTIFACT_BYTES = 16 << 10
InlineArtifactName = Literal["raw", "logs", "counters"]
InlineArtifactBase64 = Annotated[
    str, Field(max_length=4 * -(-INLINE_ARTIFACT_BYTES // 3), pattern=BASE64)
]


def _none(value: object) -> bool:
    return value is None


class Result(Strict):
    """What an agent stores for one work item; id equals the item id, so a retry writes once.

    Figures of the whole measured period are here; the per-second timeline (I/Os, bytes
    and latency histogram per second), the engine's own output and its logs are artifacts
    in Blob Storage, named in ``artifacts``; a small timeline is carried here instead
    (``inline_timeline``), and named in ``artifacts`` all the same, as are small other
    artifacts on their way to Blob Storage (``inline_artifacts``: the API puts them there
    and stores the result without them)."""

    # Ids have their work item's forms: they become Cosmos DB ids and partition keys.
    id: str = Field(pattern=ITEM_ID_PATTERN)
    run_id: str = Field(pattern=RUN_ID_PATTERN)
    item_id: str = Field(pattern=ITEM_ID_PATTERN)
    step: Int
    client: Int
    agent_id: str
    engine: Engine
    engine_version: str
    targets: list[str]
    workload: Workload
    started_at_ms: Int = Field(description="Unix ms when measuring started (after ramp)")
    ended_at_ms: Int
    read: DirectionResult | None = None
    write: DirectionResult | None = None
    start: StartInfo | None = None
    fill: FillInfo | None = None
    steadystate: FioJson | None = Field(None, description="fio's steady-state verdict")
    host: HostFacts
    mounts: list[MountFacts]
    artifacts: dict[ArtifactName, ArtifactRef] = Field(
        default_factory=dict,
        description="artifacts in Blob Storage, by name (the timeline's here too when "
        "inline_timeline carries it)",
    )
    inline_timeline: InlineBase64 | None = Field(
        None,
        exclude_if=_none,
        description="the timeline artifact's bytes (gzip, base64 here), when at most "
        "8 KiB: carried in the result instead of uploaded (agent protocol 3); "
        "artifacts.timeline names their size and SHA-256",
    )

    inline_artifacts: dict[InlineArtifactName, InlineArtifactBase64] | None = Field(
        None,
        exclude_if=_none,
        description="other artifacts' bytes (gzip, base64 here), each at most 16 KiB, "
        "carried in the result instead of uploaded (agent protocol 4): the API puts them "
        "in Blob Storage before it stores the result, which keeps none of them; "
        "artifacts names each one's size and SHA-256",
    )

    def carried_timeline(self) -> bytes | None:
        """The timeline's packed bytes when the result carries them (``inline_timeline``)."""
        return None if self.inline_timeline is None else base64.b64decode(self.inline_timeline)

    def carried_artifacts(self) -> dict[InlineArtifactName, bytes]:
        """The other artifacts' packed bytes the result carries (``inline_artifacts``)."""
        return {n: base64.b64decode(d) for n, d in (self.inline_artifacts or {}).items()}

    def as_stored(self) -> Result:
        """The document stored: without the artifacts it carried (in Blob Storage now)."""
        return self.model_copy(update={"inline_artifacts": None})

    counters: CountersSummary | None = Field(
        None,
        description="host CPU, network and NFS counters sampled each second (fio); the "
        "client's CPU as DiskSpd measured it (diskspd)",
    )


class StoredResult(Result):
    """A result as the store hands it back: read leniently (a field no longer written is
    ignored), as core.models.stored reads its documents; what an agent sends stays strict."""

    model_config = ConfigDict(extra="ignore")


class SummaryPercentiles(Strict):
    """p50, p99 and p99.9 of one latency kind, in ns (left out where the result has none)."""

    model_config = ConfigDict(
        validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )
    p50: float | None = Field(None, exclude_if=_none)
    p99: float | None = Field(None, exclude_if=_none)
    p99_9: float | None = Field(None, alias="p99.9", exclude_if=_none)

    @classmethod
    def of(cls, percentiles: dict[str, float]) -> SummaryPercentiles:
        """From fio's percentile keys ('99.900000')."""
        keys = {"p50": "50.000000", "p99": "99.000000", "p99_9": "99.900000"}
        return cls(**{name: percentiles[k] for name, k in keys.items() if k in percentiles})


class DirectionSummary(Strict):
    """One direction of a result without its histogram bins (ns, bytes)."""

    iops: float
    bw_bytes: float
    total_ios: int
    lat_mean_ns: float
    clat_mean_ns: float
    slat_mean_ns: float | None
    lat_ns: SummaryPercentiles | None = Field(description="total latency, where recorded")
    clat_ns: SummaryPercentiles

    @classmethod
    def of(cls, r: DirectionResult) -> DirectionSummary:
        return cls(
            iops=r.iops,
            bw_bytes=r.bw_bytes,
            total_ios=r.total_ios,
            lat_mean_ns=r.lat_ns.mean,
            clat_mean_ns=r.clat_ns.mean,
            slat_mean_ns=r.slat_ns.mean if r.slat_ns else None,
            lat_ns=SummaryPercentiles.of(r.lat_percentiles_ns) if r.lat_percentiles_ns else None,
            clat_ns=SummaryPercentiles.of(r.clat_percentiles_ns),
        )


class ResultSummary(Strict):
    """A result as a run's view shows it: without its histogram bins, which can run to
    tens of kilobytes."""

    agent_id: str
    engine_version: str
    started_at_ms: int
    ended_at_ms: int
    start: StartInfo | None
    host: HostFacts
    mounts: list[MountFacts]
    fill: FillInfo | None
    steadystate: FioJson | None
    read: DirectionSummary | None = Field(None, exclude_if=_none)
    write: DirectionSummary | None = Field(None, exclude_if=_none)

    @classmethod
    def of(cls, r: Result) -> ResultSummary:
        return cls(
            agent_id=r.agent_id,
            engine_version=r.engine_version,
            started_at_ms=r.started_at_ms,
            ended_at_ms=r.ended_at_ms,
            start=r.start,
            host=r.host,
            mounts=r.mounts,
            fill=r.fill,
            steadystate=r.steadystate,
            read=DirectionSummary.of(r.read) if r.read else None,
            write=DirectionSummary.of(r.write) if r.write else None,
        )


class FullResult(StoredResult):
    """A client's result with its per-second series and the engine's own output."""

    series_window: Literal["own", "common"] = Field(
        description="the client's own measured period, or its step's common window"
    )
    series: dict[Direction, list[dict[str, float]]] = Field(
        description="IOPS and bytes in each second of the window: t_ms, iops, bw_bytes"
    )
    # Never sent: the series below is the timeline (the field stays off the document too).
    inline_timeline: SkipJsonSchema[None] = Field(None, exclude=True)
    inline_artifacts: SkipJsonSchema[None] = Field(None, exclude=True)
    raw: Any = Field(description="the engine's own output (fio's JSON), while it is kept")
    raw_removed: bool | None = Field(
        None, exclude_if=_none, description="true once the raw output was removed (retention)"
    )
