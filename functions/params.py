"""Parameter types and request helpers shared by the API's routers (functions/api.py,
functions/agent_api.py). Path and query parameters are typed and bounded here, so a
malformed one is a 400 naming it (functions/errors.py), never a lookup."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Header, Path, Request

from core.errors import TooLarge
from core.models import ITEM_ID_PATTERN, RUN_ID_PATTERN
from core.runs.guardrails import LOCAL_CALLER, Caller
from core.runs.service import RunService
from functions import context
from functions.inputs import MAX_BODY_BYTES, parse_json

RunId = Annotated[str, Path(pattern=RUN_ID_PATTERN)]
ItemId = Annotated[str, Path(pattern=ITEM_ID_PATTERN)]
ScheduleId = Annotated[str, Path(pattern=r"^sch-[0-9a-f]{16}$")]
# Series keys are 16 hex digits and regression ids <key>.<metric>.<method>.<run> today;
# the patterns hold what a Cosmos DB id may be (no / \ ? #, at most 255 characters).
SeriesKey = Annotated[str, Path(pattern=r"^[A-Za-z0-9._-]{1,128}$")]
RegressionId = Annotated[str, Path(pattern=r"^[A-Za-z0-9._-]{1,255}$")]
ProfileName = Annotated[str, Path(pattern=r"^[a-z0-9-]{1,64}$")]
# Read by the auth middleware; declared on POST /api/runs for the document.
DoorHeader = Annotated[
    str | None,
    Header(description="api (default), pipeline or cli: recorded as requested_by.door"),
]
STORE = (503,)  # answers that read or write Cosmos DB can fail with
MAX_DOCUMENT_BYTES = 2 * 1024 * 1024  # a body stored as one Cosmos DB document


def svc() -> RunService:
    return context.service()


def caller_of(request: Request) -> Caller:
    caller: Caller = getattr(request.state, "caller", LOCAL_CALLER)
    return caller


async def read_body(request: Request, cap: int = MAX_BODY_BYTES) -> bytes:
    """The body, or 413 (TooLarge) as soon as it is known to exceed ``cap``: from its
    Content-Length before reading, or while reading a body sent without one."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise TooLarge(f"the body is {int(declared):,} bytes; at most {cap:,}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise TooLarge(f"the body is over {cap:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def json_body(request: Request, cap: int = MAX_BODY_BYTES) -> Any:
    return parse_json(await read_body(request, cap))
