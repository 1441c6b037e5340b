"""Names, patterns and bounds every model shares, and the strict base model."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
)

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
# W3C Trace Context, version 00: 00-<trace id>-<parent span id>-<flags>
TRACEPARENT_PATTERN = r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"

# Bounds: wide enough for the published methods (64 KiB x 40 threads, 256 KiB sequential,
# 600 s measured), narrow enough that a typo cannot fill a volume or pin an agent for a day.
MIN_BS, MAX_BS = 512, 16 << 20
MIN_FILE_SIZE, MAX_FILE_SIZE = 1 << 20, 16 << 40
# One run of a thousand clients (issue 29.2): every per-run document and queue message
# stays under Azure's limits at this size (tests/test_thousand_clients.py).
MAX_CLIENTS = 1000
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


def whole(value: object) -> object:
    """A float with no fractional part as the int it is: JSON has one number type, and JSON
    Schema's "integer" includes 4.0 (draft 2020-12, section 6.1.1 of its Validation part),
    so a contract's integer field takes it. Anything else is left to the strict check
    (core.validation.parse validates what callers send in pydantic's strict mode)."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


# An integer of a contract: strict (no "1", no true), but 4.0 is 4. Bounds of one inside a
# union or a list go before the validator (``Annotated[int, Field(...), AS_INT]``): after
# it, pydantic writes them into the JSON Schema as "ge"/"le", which no validator reads.
AS_INT = BeforeValidator(whole)
Int = Annotated[int, AS_INT]
Clients = Annotated[int, Field(ge=1, le=MAX_CLIENTS), AS_INT]
MAX_IOPS = 100_000_000
Iops = Annotated[int, Field(ge=1, le=MAX_IOPS), AS_INT]
MetadataOp = Literal["create", "stat", "open", "delete"]
# A phase's files: files_per_dir per job (fio's nrfiles), one leaf directory per job.
MAX_FILES_PER_DIR = 1_000_000
MAX_DIR_DEPTH = 16
MAX_META_FILE_SIZE = 64 << 10
DEFAULT_METADATA_OPS: tuple[MetadataOp, ...] = ("create", "stat", "delete")


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


class Strict(BaseModel):
    """Unknown fields are errors; values never change after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True)
