"""Typed contract of the service: run requests, work items and results.

These pydantic models are the single source of ``schemas/*.schema.json`` (regenerate with
``make schemas``; a test fails when they drift). The API validates request bodies against the
JSON Schema files, then builds these models for typed use.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from core.host_counters import CountersSummary
from core.units import SIZE_PATTERN, parse_size

ALIAS_PATTERN = r"^[a-z][a-z0-9-]{0,30}$"
# An alias names its fio job section, and fio reads every section whose name starts with
# "global" as the [global] section (fio init.c, __parse_jobs_ini: strncmp(name, "global", 6);
# HOWTO "Job file format"): "global-vol" would merge into the shared options, and two
# [global] sections would end up in one job file. No other section name is special to fio.
RESERVED_ALIAS_PATTERN = r"^global"
ALIAS_RULE = 'lowercase, e.g. scratch; not starting with "global", which fio reserves'
RUN_ID_PATTERN = r"^r-[0-9a-f]{32}$"
ITEM_ID_PATTERN = r"^r-[0-9a-f]{32}\.s[0-9]{1,4}\.c[0-9]{1,4}$"
POOL_PATTERN = r"^[a-z0-9](?:[a-z0-9-]{0,28}[a-z0-9])?$"
TAG_KEY_PATTERN = r"^[A-Za-z0-9_.:-]{1,64}$"

# Bounds: wide enough for the published methods (64 KiB x 40 threads, 256 KiB sequential,
# 600 s measured), narrow enough that a typo cannot fill a volume or pin an agent for a day.
MIN_BS, MAX_BS = 512, 16 << 20
MIN_FILE_SIZE, MAX_FILE_SIZE = 1 << 20, 16 << 40
MAX_CLIENTS = 64
MAX_NUMJOBS, MAX_IODEPTH = 256, 1024
MAX_RTT_MS = 60_000  # an agent's reported round trip to the API, at most
MAX_TARGETS = 16
MAX_STEPS = 16
# A data set serves every client its own files (client c, job j: file c x numjobs + j).
MAX_DATASET_FILES = MAX_CLIENTS * MAX_NUMJOBS
# Relative to the mount: 1 to 8 names of letters, digits, '.', '_' or '-', none starting with
# '.', so no segment can be '.' or '..' and the path cannot leave the mount by its text.
DATASET_DIR_PATTERN = (
    r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}(?:/[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}){0,7}$"
)
# One "{i}" (the file's index) in a plain file name: fio would misread ':' in filename=.
DATASET_NAME_PATTERN = r"^[A-Za-z0-9._-]{0,30}\{i\}[A-Za-z0-9._-]{0,30}$"

ReadWrite = Literal["read", "write", "randread", "randwrite", "rw", "randrw"]
IoEngine = Literal["libaio", "io_uring", "psync", "sync", "posixaio"]
Engine = Literal["fio", "diskspd"]
Clients = Annotated[int, Field(ge=1, le=MAX_CLIENTS)]


def check_alias(alias: str) -> str:
    """``alias`` if it may name a mount (and so a fio job section); else ValueError.

    Every door checks aliases here: run requests (API, CLI, bots, schedules), the agent's
    mounts, the target registry and the job file writer."""
    if not isinstance(alias, str) or not re.fullmatch(ALIAS_PATTERN, alias):
        raise ValueError(f"mount alias {alias!r} is not valid ({ALIAS_RULE})")
    if re.match(RESERVED_ALIAS_PATTERN, alias):
        raise ValueError(
            f"mount alias {alias!r} is reserved: fio reads a job section named global... as "
            "its [global] section"
        )
    return alias


Alias = Annotated[
    str,
    Field(
        pattern=ALIAS_PATTERN,
        description=f"a mount alias that agents expose ({ALIAS_RULE}), not a path",
        # pydantic's regex engine has no look-ahead, so the reserved prefix is a rule of its
        # own, for JSON Schema readers too.
        json_schema_extra={"not": {"pattern": RESERVED_ALIAS_PATTERN}},
    ),
    AfterValidator(check_alias),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SteadyState(_Strict):
    """fio's steady-state detection (fio HOWTO, "Steady state"): the metric's range or
    slope over ``duration_s`` must stay under ``limit_pct`` percent of its mean."""

    metric: Literal["iops", "iops_slope", "bw", "bw_slope"] = "iops_slope"
    limit_pct: float = Field(0.3, gt=0, le=100)
    duration_s: int = Field(60, ge=5, le=3_600)
    ramp_s: int = Field(0, ge=0, le=3_600)


class FieldSweep(_Strict):
    """One measured step per value of one workload field."""

    field: Literal["iodepth", "numjobs", "bs"]
    values: list[int | str] = Field(min_length=1, max_length=MAX_STEPS)


class RateSweep(_Strict):
    """Vdbench's curve: a first unthrottled step finds the maximum, then one step at each
    percentage of it (rate_iops), for the latency-versus-IOPS curve."""

    rate_pct: list[int] = Field(
        default_factory=lambda: [10, 20, 30, 40, 50, 60, 70, 80, 90, 100],
        min_length=1,
        max_length=MAX_STEPS,
    )

    @field_validator("rate_pct")
    @classmethod
    def _pcts(cls, v: list[int]) -> list[int]:
        if any(not 1 <= p <= 100 for p in v):
            raise ValueError("each percentage is between 1 and 100")
        return v


class Workload(_Strict):
    """What one client runs. Every field is typed and bounded; the agent writes the fio job."""

    rw: ReadWrite = "randread"
    bs: str = Field(
        "4k", pattern=SIZE_PATTERN, description="a block size such as 4k, 64k or 1m (512 B to 16m)"
    )
    iodepth: int = Field(1, ge=1, le=MAX_IODEPTH)
    numjobs: int = Field(1, ge=1, le=MAX_NUMJOBS, description="Threads (fio jobs) per client")
    rwmixread: int = Field(50, ge=0, le=100, description="Read share of rw/randrw, percent")
    size: str = Field(
        "64m",
        pattern=SIZE_PATTERN,
        description="a file size per job such as 64m or 10g (1m to 16t)",
    )
    runtime: int = Field(30, ge=1, le=86_400, description="Measured seconds")
    ramp_time: int = Field(0, ge=0, le=3_600, description="Warm-up seconds, not measured")
    direct: bool = True
    ioengine: IoEngine = "libaio"
    rate_iops: int | None = Field(
        None, ge=1, le=100_000_000, description="cap on this client's total IOPS (fio rate_iops)"
    )
    steadystate: SteadyState | None = Field(
        None, description="fio steady-state criterion (fio ss=): stop early once attained"
    )

    @field_validator("bs")
    @classmethod
    def _bs_bounds(cls, v: str) -> str:
        n = parse_size(v)
        if not MIN_BS <= n <= MAX_BS or n % 512:
            raise ValueError("must be a multiple of 512 bytes between 512 and 16m")
        return v

    @field_validator("size")
    @classmethod
    def _size_bounds(cls, v: str) -> str:
        if not MIN_FILE_SIZE <= parse_size(v) <= MAX_FILE_SIZE:
            raise ValueError("must be between 1m and 16t")
        return v

    @model_validator(mode="after")
    def _bs_fits(self) -> Workload:
        if parse_size(self.bs) > parse_size(self.size):
            raise ValueError("bs must not exceed size")
        return self

    @property
    def bs_bytes(self) -> int:
        return parse_size(self.bs)

    @property
    def size_bytes(self) -> int:
        return parse_size(self.size)


class DataSet(_Strict):
    """Files prepared on a read-only target (named by the target registry): runs read them
    where they are, and nothing on that mount is laid out, created, extended or written.
    File ``i`` is ``<mount>/<directory>/<file_name with {i} = i>``, for i from 0 to
    ``files - 1``; client c's job j reads file ``c x numjobs + j``, so clients never share
    a file."""

    directory: str = Field(
        pattern=DATASET_DIR_PATTERN,
        max_length=200,
        description="the data set's directory, relative to the mount (e.g. bench-data)",
    )
    files: int = Field(ge=1, le=MAX_DATASET_FILES, description="files in the data set")
    file_size: str = Field(
        pattern=SIZE_PATTERN,
        description="the size every file has at least, fully written (1m to 16t)",
    )
    file_name: str = Field(
        "data.{i}",
        pattern=DATASET_NAME_PATTERN,
        description="file names, {i} standing for the index from 0 (e.g. data.{i}.0)",
    )

    @field_validator("file_size")
    @classmethod
    def _file_size_bounds(cls, v: str) -> str:
        if not MIN_FILE_SIZE <= parse_size(v) <= MAX_FILE_SIZE:
            raise ValueError("must be between 1m and 16t")
        return v

    @property
    def file_size_bytes(self) -> int:
        return parse_size(self.file_size)

    def file_path(self, index: int) -> str:
        """File ``index`` relative to the mount."""
        return f"{self.directory}/{self.file_name.replace('{i}', str(index))}"

    def first_file(self, client: int, numjobs: int) -> int:
        """The index of client ``client``'s first file: each client reads files of its own,
        one per job, so clients never share one (nor its cache)."""
        return client * numjobs


class RunRequest(_Strict):
    """Body of ``POST /api/runs``."""

    target: Alias | None = Field(None, description="the mount to load (or give targets)")
    targets: list[Alias] = Field(
        default_factory=list,
        max_length=MAX_TARGETS,
        validate_default=True,
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
    sweep: FieldSweep | RateSweep | None = None
    target_iops: int | None = Field(
        None,
        ge=1,
        le=100_000_000,
        description="size concurrency by Little's law from a first 1-thread latency step",
    )
    repetitions: int = Field(1, ge=1, le=10)
    discard_first: bool = Field(False, description="treat the first repetition as warm-up")
    clients: Clients | list[Clients] = Field(
        1,
        description="distinct agents loading the target at once; a list sweeps it, one "
        "measured step per entry, run one after another",
    )
    barrier_timeout_s: int = Field(
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
            raise ValueError("give either target or targets, not both")
        if single is None and not v and "target" not in info.data:
            return v  # target itself was invalid: that error already names it
        if single is None and not v:
            raise ValueError("give target (one mount alias) or targets (several)")
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


class WorkItem(_Strict):
    """Queue message: ids and the typed workload only (64 KiB is the queue's hard limit)."""

    v: Literal[1] = 1
    run_id: str = Field(pattern=RUN_ID_PATTERN)
    item_id: str = Field(pattern=ITEM_ID_PATTERN)
    step: int = Field(ge=0, le=9_999)
    client: int = Field(ge=0, le=MAX_CLIENTS - 1)
    clients: int = Field(ge=1, le=MAX_CLIENTS)
    pool: str = Field(pattern=POOL_PATTERN)
    targets: list[Alias] = Field(min_length=1, max_length=MAX_TARGETS)
    engine: Engine
    workload: Workload
    barrier_timeout_s: int = Field(120, ge=5, le=3_600)
    fill: bool = False
    files_per_target: int = Field(1, ge=1, le=64)
    cooldown_s: int = Field(
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

    @model_validator(mode="after")
    def _datasets_on_targets(self) -> WorkItem:
        stray = sorted(set(self.datasets) - set(self.targets))
        if stray:
            raise ValueError(f"datasets name mounts that are not targets: {', '.join(stray)}")
        return self


Direction = Literal["read", "write"]


class LatencyStats(_Strict):
    min: float
    max: float
    mean: float
    stddev: float


class DirectionResult(_Strict):
    """One direction of one client's result, in fio's units (ns, bytes)."""

    io_bytes: int = Field(ge=0)
    total_ios: int = Field(ge=0)
    runtime_ms: int = Field(ge=0)
    iops: float = Field(ge=0)
    bw_bytes: float = Field(ge=0, description="Bytes per second")
    lat_ns: LatencyStats
    clat_ns: LatencyStats
    clat_percentiles_ns: dict[str, float] = Field(description="fio's percentiles, key '99.900000'")
    clat_bins_ns: dict[str, int] = Field(description="fio json+ histogram: bucket value -> count")


class SeriesPoint(_Strict):
    """One second of one client: t is the Unix second the sample interval ended in."""

    t: int
    iops: float = Field(ge=0)
    bw_bytes: float = Field(ge=0)


class HostFacts(_Strict):
    hostname: str
    kernel: str
    os: str
    cpu_count: int
    vm_size: str | None = None
    region: str | None = None


class MountFacts(_Strict):
    alias: str
    path: str
    mount_point: str
    fstype: str
    options: str
    source: str


class FillInfo(_Strict):
    ran: bool = Field(description="False when a valid fill marker was found")
    seconds: float
    marker: str


class StartInfo(_Strict):
    """When this client was told to start and when it did: the start skew it saw."""

    scheduled_ms: int = Field(description="the step's common start instant, Unix ms")
    released_ms: float = Field(description="when this agent opened fio's start gate, Unix ms")
    skew_ms: float = Field(
        description="fio's measured start (its first 1 s log line minus 1 s) minus scheduled"
    )


ARTIFACT_NAMES = ("timeline", "raw", "logs", "counters")
ArtifactName = Literal["timeline", "raw", "logs", "counters"]


class ArtifactRef(_Strict):
    """A large output kept in Blob Storage beside the result (a Cosmos DB document is at
    most 2 MB): the per-second timeline with histogram rows, the engine's own output, the
    raw logs. Stored gzip-compressed."""

    name: ArtifactName
    bytes: int = Field(ge=0, description="compressed size")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class Result(_Strict):
    """What an agent stores for one work item; id equals the item id, so a retry writes once.

    Figures of the whole measured period are here; the per-second timeline (I/Os, bytes
    and latency histogram per second), the engine's own output and its logs are artifacts
    in Blob Storage, named in ``artifacts``."""

    # Ids have their work item's forms: they become Cosmos DB ids and partition keys.
    id: str = Field(pattern=ITEM_ID_PATTERN)
    run_id: str = Field(pattern=RUN_ID_PATTERN)
    item_id: str = Field(pattern=ITEM_ID_PATTERN)
    step: int
    client: int
    agent_id: str
    engine: Engine
    engine_version: str
    targets: list[str]
    workload: Workload
    started_at_ms: int = Field(description="Unix ms when measuring started (after ramp)")
    ended_at_ms: int
    read: DirectionResult | None = None
    write: DirectionResult | None = None
    start: StartInfo | None = None
    fill: FillInfo | None = None
    steadystate: dict[str, Any] | None = Field(None, description="fio's steady-state verdict")
    host: HostFacts
    mounts: list[MountFacts]
    artifacts: dict[ArtifactName, ArtifactRef] = Field(
        default_factory=dict, description="artifacts in Blob Storage, by name"
    )
    counters: CountersSummary | None = Field(
        None, description="host CPU, network and NFS counters sampled each second"
    )


SCHEMA_MODELS: dict[str, type[BaseModel]] = {
    "run-request": RunRequest,
    "work-item": WorkItem,
    "result": Result,
}
