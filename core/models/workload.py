"""What fio or DiskSpd is asked to do: the typed workload and its parts."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from core.models.common import (
    AS_INT,
    DATASET_DIR_PATTERN,
    DATASET_NAME_PATTERN,
    DEFAULT_METADATA_OPS,
    MAX_BS,
    MAX_DATASET_FILES,
    MAX_DIR_DEPTH,
    MAX_FILE_SIZE,
    MAX_FILES_PER_DIR,
    MAX_IODEPTH,
    MAX_META_FILE_SIZE,
    MAX_NUMJOBS,
    MAX_STEPS,
    MIN_BS,
    MIN_FILE_SIZE,
    Int,
    IoEngine,
    Iops,
    MetadataOp,
    ReadWrite,
    Strict,
    whole,
)
from core.units import SIZE_PATTERN, parse_size


class SteadyState(Strict):
    """fio's steady-state detection (fio HOWTO, "Steady state"): the metric's range or
    slope over ``duration_s`` must stay under ``limit_pct`` percent of its mean."""

    metric: Literal["iops", "iops_slope", "bw", "bw_slope"] = "iops_slope"
    limit_pct: float = Field(0.3, gt=0, le=100)
    duration_s: Int = Field(60, ge=5, le=3_600)
    ramp_s: Int = Field(0, ge=0, le=3_600)


def _typed_values(name: str, item: dict[str, Any]) -> dict[str, Any]:
    """The document's form of "a sweep of ``name`` takes values like ``item``"."""
    return {
        "if": {"properties": {"field": {"const": name}}},
        "then": {"properties": {"values": {"items": item}}},
    }


def _count(most: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": 1, "maximum": most, "x-error": f"1 to {most}"}


_SIZE_VALUE = {"type": "string", "pattern": SIZE_PATTERN, "x-error": "a size: 4k"}
# What each swept field's values are: said in the document (JSON Schema's if/then) and
# checked by FieldSweep from the same table.
_VALUE_ITEMS: dict[str, dict[str, Any]] = {
    "iodepth": _count(MAX_IODEPTH),
    "numjobs": _count(MAX_NUMJOBS),
    "bs": _SIZE_VALUE,
}
_SWEEP_VALUES: dict[str, Any] = {
    "allOf": [_typed_values(name, item) for name, item in _VALUE_ITEMS.items()]
}


def _takes(item: dict[str, Any], value: object) -> bool:
    """Whether ``value`` is one of ``item``'s (an integer in its bounds, or a size)."""
    if item["type"] == "string":
        return isinstance(value, str) and re.fullmatch(item["pattern"], value) is not None
    value = whole(value)
    return type(value) is int and item["minimum"] <= value <= item["maximum"]


def _not_taken(values: list[Any], rule: str | None) -> ValidationError:
    """Each value the field does not take, named by its index (``values.2``)."""
    return ValidationError.from_exception_data(
        "FieldSweep",
        [
            InitErrorDetails(
                type=PydanticCustomError("sweep_value", rule or "{kind}", {"kind": kind}),
                loc=(i,),
                input=value,
            )
            for i, value, kind in values
        ],
    )


class FieldSweep(Strict):
    """One measured step per value of one workload field."""

    # The values' type follows the field (issue 24.5: said in the document too).
    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        json_schema_extra=_SWEEP_VALUES,
    )

    field: Literal["iodepth", "numjobs", "bs"]
    values: list[Int | str] = Field(min_length=1, max_length=MAX_STEPS)

    @field_validator("values", mode="before")
    @classmethod
    def _of_the_field(cls, v: Any, info: ValidationInfo) -> Any:
        """Values of the field's own kind: counts in its bounds, or sizes (a field that is
        not one of the three is named by its own error; its values need only be integers
        or strings)."""
        if not isinstance(v, list):
            return v
        item = _VALUE_ITEMS.get(info.data.get("field", ""))
        if item is None:
            bad = [
                (i, x, f"{x!r} is not of type 'integer', 'string'")
                for i, x in enumerate(v)
                if not (isinstance(x, str) or type(whole(x)) is int)
            ]
        else:
            bad = [(i, x, "") for i, x in enumerate(v) if not _takes(item, x)]
        if bad:
            raise _not_taken(bad, item["x-error"] if item else None)
        return v


class GridSweep(Strict):
    """Two workload fields crossed, one measured step per pair of values (fio-plot's
    iodepth x numjobs grid), drawn as heatmaps: ``{"grid": [{"field": "iodepth", "values":
    [1, 4, 16]}, {"field": "numjobs", "values": [1, 2]}]}``. The first field varies
    fastest."""

    grid: list[FieldSweep] = Field(min_length=2, max_length=2)

    @model_validator(mode="after")
    def _distinct(self) -> GridSweep:
        if self.grid[0].field == self.grid[1].field:
            raise ValueError("the grid's two fields must differ")
        n = len(self.grid[0].values) * len(self.grid[1].values)
        if n > MAX_STEPS:
            raise ValueError(f"{n} steps (values x values); at most {MAX_STEPS}")
        return self


class RateSweep(Strict):
    """Vdbench's curve: a first unthrottled step finds the maximum, then one step at each
    percentage of it (rate_iops), for the latency-versus-IOPS curve."""

    rate_pct: list[Annotated[int, Field(ge=1, le=100), AS_INT]] = Field(
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


METADATA_ORDERS: tuple[tuple[str, ...], ...] = (
    ("create", "delete"),
    ("create", "stat", "delete"),
    ("create", "open", "delete"),
    ("create", "stat", "open", "delete"),
    ("create", "open", "stat", "delete"),
)
OPS_ORDER = "phases start with create and end with delete (the run's own tree)"


def _op_among(ops: tuple[str, ...], present: bool) -> dict[str, Any]:
    """The document's form of "op is one of ops" for one order of ops (or ops left out).
    (An ``if`` on an array's value is beyond what Schemathesis generates from: an anyOf.)"""
    given: dict[str, Any] = (
        {"required": ["ops"], "properties": {"ops": {"enum": [list(ops)]}}}
        if present
        else {"not": {"required": ["ops"]}}
    )
    given.setdefault("properties", {})["op"] = {"enum": [None, *ops]}
    return given


class Metadata(Strict):
    """Metadata operations by fio's file engines (filecreate, filestat, filedelete), each
    phase its own measured step, in ``ops`` order: create the tree, then stat or open
    (open and close) its files, then delete them. Every fio job owns one leaf directory
    ``dir_depth`` levels below the client's tree root and ``files_per_dir`` files in it.
    ``op`` is the phase a step measures (set by the planner)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        json_schema_extra={
            "anyOf": [
                *(_op_among(order, True) for order in METADATA_ORDERS),
                _op_among(DEFAULT_METADATA_OPS, False),
            ],
            "x-error": "op must be one of the phases in ops (or left out)",
        },
    )

    ops: list[MetadataOp] = Field(
        default_factory=lambda: list(DEFAULT_METADATA_OPS),
        min_length=2,
        max_length=4,
        description="phases in order: create first, delete last, stat/open between",
        # Every order the validator below takes, listed for the document (issue 24.5).
        json_schema_extra={"enum": [list(o) for o in METADATA_ORDERS], "x-error": OPS_ORDER},
    )
    files_per_dir: Int = Field(
        1000, ge=1, le=MAX_FILES_PER_DIR, description="files in each job's leaf directory"
    )
    dir_depth: Int = Field(
        1, ge=1, le=MAX_DIR_DEPTH, description="directory levels from the tree root to files"
    )
    file_size: Int = Field(
        0,
        ge=0,
        le=MAX_META_FILE_SIZE,
        description="bytes in each file (0 to 65536): fio's filecreate creates empty files, "
        "the agent writes these bytes after the create phase, unmeasured",
    )
    op: MetadataOp | None = Field(None, description="the phase this step measures")

    @field_validator("ops")
    @classmethod
    def _order(cls, v: list[str]) -> list[str]:
        if v[0] != "create" or v[-1] != "delete":
            raise ValueError(OPS_ORDER)
        if len(set(v)) != len(v) or any(o not in ("stat", "open") for o in v[1:-1]):
            raise ValueError("between create and delete: stat and/or open, each at most once")
        return v

    @model_validator(mode="after")
    def _op_in_ops(self) -> Metadata:
        if self.op is not None and self.op not in self.ops:
            raise ValueError(f"op {self.op} is not one of the phases {self.ops}")
        return self


class Workload(Strict):
    """What one client runs. Every field is typed and bounded; the agent writes the fio job."""

    rw: ReadWrite = "randread"
    bs: str = Field(
        "4k", pattern=SIZE_PATTERN, description="a block size such as 4k, 64k or 1m (512 B to 16m)"
    )
    iodepth: Int = Field(1, ge=1, le=MAX_IODEPTH)
    numjobs: Int = Field(1, ge=1, le=MAX_NUMJOBS, description="Threads (fio jobs) per client")
    rwmixread: Int = Field(50, ge=0, le=100, description="Read share of rw/randrw, percent")
    size: str = Field(
        "64m",
        pattern=SIZE_PATTERN,
        description="a file size per job such as 64m or 10g (1m to 16t)",
    )
    runtime: Int = Field(30, ge=1, le=86_400, description="Measured seconds")
    ramp_time: Int = Field(0, ge=0, le=3_600, description="Warm-up seconds, not measured")
    direct: bool = True
    ioengine: IoEngine = "libaio"
    rate_iops: Iops | None = Field(
        None, description="cap on this client's total IOPS (fio rate_iops)"
    )
    steadystate: SteadyState | None = Field(
        None, description="fio steady-state criterion (fio ss=): stop early once attained"
    )
    metadata: Metadata | None = Field(
        None,
        description="metadata operations (create, stat/open, delete) instead of data I/O; "
        "runtime caps each phase",
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

    @model_validator(mode="after")
    def _metadata_alone(self) -> Workload:
        # Create and delete count every file once: a warm-up would hide some of them, and
        # fio's steady-state check has no meaning for a phase that ends when its files do.
        if self.metadata is not None and (self.ramp_time or self.steadystate is not None):
            raise ValueError("metadata phases take no ramp_time and no steadystate")
        return self

    @property
    def bs_bytes(self) -> int:
        return parse_size(self.bs)

    @property
    def size_bytes(self) -> int:
        return parse_size(self.size)


class DataSet(Strict):
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
    files: Int = Field(ge=1, le=MAX_DATASET_FILES, description="files in the data set")
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
