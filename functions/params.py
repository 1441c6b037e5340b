"""Parameter types, dependencies and request helpers shared by the API's routers. Path and
query parameters are typed and bounded here, so a malformed one is a 400 naming it
(functions/errors.py), never a lookup. The service's parts come as dependencies, from the
:class:`~functions.context.Services` the app was created with."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, Header, Path, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, PlainValidator

from core.errors import TooLarge
from core.models import ITEM_ID_PATTERN, RUN_ID_PATTERN
from core.monitoring.monitor import Monitor
from core.monitoring.scheduler import Scheduler
from core.runs.guardrails import LOCAL_CALLER, Caller
from core.runs.service import RunService
from functions import context
from functions.context import Services
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


def services(request: Request) -> Services:
    """The app's parts (``create_app(services)``), or the process's default."""
    given: Services | None = request.app.state.services
    return given if given is not None else context.current()


Parts = Annotated[Services, Depends(services)]


def _service(parts: Parts) -> RunService:
    return parts.service


def _monitor(parts: Parts) -> Monitor:
    return parts.monitor


def _scheduler(parts: Parts) -> Scheduler:
    return parts.scheduler


def caller_of(request: Request) -> Caller:
    """Who is calling, as the sign-in middleware found it (functions/signin.py)."""
    caller: Caller = getattr(request.state, "caller", LOCAL_CALLER)
    return caller


Svc = Annotated[RunService, Depends(_service)]
Monitoring = Annotated[Monitor, Depends(_monitor)]
Schedules = Annotated[Scheduler, Depends(_scheduler)]
CallerOf = Annotated[Caller, Depends(caller_of)]


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


def as_sent(value: Any) -> Any:
    """A body handed over as sent (see :data:`AsSent`)."""
    return value


# A JSON body the document describes by its model and the handler receives as parsed
# (strict JSON, unvalidated): for the bodies the core validates itself, with its messages,
# and the chat doors, which read theirs after checking its signature. Use as
# ``Annotated[Any, documented_as(Model), Body()]``.
def documented_as(model: type[BaseModel]) -> PlainValidator:
    return PlainValidator(as_sent, json_schema_input_type=model)


class _Parsed(Request):
    """A request whose body was read and parsed already (:class:`JsonRoute`)."""

    def __init__(self, request: Request, raw: bytes, parsed: Any) -> None:
        # Read as JSON whatever its Content-Type says (as the API always has): FastAPI is
        # told it is JSON, so it takes the document, not the bytes.
        headers = [(k, v) for k, v in request.scope["headers"] if k != b"content-type"]
        scope = {**request.scope, "headers": [*headers, (b"content-type", b"application/json")]}
        super().__init__(scope, request.receive)
        self._raw, self._parsed = raw, parsed

    async def stream(self) -> AsyncGenerator[bytes, None]:
        yield self._raw
        yield b""

    async def body(self) -> bytes:
        return self._raw

    async def json(self) -> Any:
        return self._parsed


class JsonRoute(APIRoute):
    """A route whose JSON body is read here, before FastAPI sees it: with a size cap (413
    past it, the rest unread) and as strict JSON (functions/inputs.py: NaN, a key given
    twice, lone surrogates, depth... are 400 naming the field). FastAPI then validates a
    typed body once with its model, or hands over a body ``documented_as`` its model."""

    max_body_bytes = MAX_BODY_BYTES
    parse_first = True

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()
        if self.body_field is None:
            return handle
        cap = self.max_body_bytes

        async def read_first(request: Request) -> Response:
            raw = await read_body(request, cap)
            parsed = (parse_json(raw) if raw else None) if self.parse_first else raw
            return await handle(_Parsed(request, raw, parsed))

        return read_first


class SignedRoute(JsonRoute):
    """A chat door's route: the body is read with the cap but handed over as bytes, parsed
    only once its signature is checked (a forged or altered request is 401, never 400)."""

    parse_first = False


def capped(cap: int) -> type[JsonRoute]:
    """:class:`JsonRoute` for bodies of up to ``cap`` bytes."""
    return type(f"JsonRoute{cap}", (JsonRoute,), {"max_body_bytes": cap})
