"""The API's OpenAPI document, as FastAPI writes it from the routes' declarations: each
route's answer model (``response_model``), status and error statuses (:func:`doc`, as
FastAPI's ``responses``); each router's tag, sign-in schemes (FastAPI security
dependencies: they document, functions/signin.py checks) and the 401/403 every signed-in
operation can answer (:data:`SIGNED_IN`). Request bodies are the handlers' typed
parameters (functions/params.py). :func:`build` patches only what FastAPI cannot express.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from fastapi import FastAPI, Security
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, Response
from fastapi.security import APIKeyHeader, HTTPBearer
from pydantic import BaseModel

from core.models.answers import ErrorBody

ERRORS: dict[int, str] = {
    400: "Invalid input: every problem, by field (body path, query, header or path name)",
    401: "Not signed in: no or unknown X-Api-Key, no Entra ID token; for the chat doors a "
    "bad, stale or missing signature or channel token",
    403: "Signed in, but with no Bench.* role, or the role may not do this (a limit crossed, "
    "someone else's run, schedule or regression: the field says which); /api/agent/* is for "
    "agents only, each reporting as itself",
    404: "No such run, item, schedule, series, regression or profile; a continuation token "
    "this listing did not give; a chat door that is not enabled",
    409: "Conflicts with the current state (busy target with on_busy refuse, Idempotency-Key "
    "reused with another body, an agent reporting for an item it does not hold, a concurrent "
    "change, a replayed chat request)",
    413: "A request body over 1 MiB (a result: 2 MiB; an admin's import: 16 MiB, an "
    "imported artifact: 256 MiB), refused before it is read; or over a "
    "limit a backing service holds (a 2 MB Cosmos DB document, an artifact's size): nothing "
    "written",
    503: "A backing service (Cosmos DB, the queue) failed or did not answer in time: retry "
    "later (a POST /api/runs answered 503 made no run that will ever run)",
}
LOCATION = {"Location": {"description": "the run's URL path", "schema": {"type": "string"}}}
# Open to anyone: liveness and the API's description. The bot routes check HMAC themselves.
PUBLIC_PATHS = frozenset({"/api/health", "/api/openapi.json", "/api/docs"})
BOT_MESSAGES = "/api/messages"  # the Teams bot: the channel's token, checked by the route
# The sign-in schemes. auto_error=False: they only document (the sign-in middleware and the
# chat doors check the credentials and answer in the API's error shape).
API_KEY = APIKeyHeader(
    name="X-Api-Key",
    scheme_name="ApiKey",
    auto_error=False,
    description="BENCH_API_KEYS (local use). With neither keys nor Entra ID configured "
    "(the local stack) the API is open.",
)
ENTRA_ID = HTTPBearer(
    scheme_name="EntraId",
    bearerFormat="JWT",
    auto_error=False,
    description="An Entra ID token for the API's app registration, checked by App "
    "Service Authentication in front of the app (roles Bench.Reader ... Bench.Admin)",
)
TEAMS_HMAC = APIKeyHeader(
    name="Authorization",
    scheme_name="TeamsHmac",
    auto_error=False,
    description="HMAC <base64 HMAC-SHA256 of the raw body>, keyed with the outgoing "
    "webhook's secret; otherwise 401",
)
BOT_TOKEN = HTTPBearer(
    scheme_name="BotToken",
    bearerFormat="JWT",
    auto_error=False,
    description="The channel's token (Bot Framework or Entra ID), for the bot's app id, "
    "from an issuer in BENCH_BOT_ISSUERS, naming the activity's serviceUrl",
)
WEBHOOK_SIGNATURE = APIKeyHeader(
    name="X-Bench-Signature",
    scheme_name="WebhookSignature",
    auto_error=False,
    description='sha256=<hex HMAC-SHA256 of "<timestamp>." + body> with BENCH_BOT_SECRET',
)
WEBHOOK_TIMESTAMP = APIKeyHeader(
    name="X-Bench-Timestamp",
    scheme_name="WebhookTimestamp",
    auto_error=False,
    description="Unix seconds, within 5 minutes of now",
)


# OpenAPI links: where an answer's id is the path parameter of further operations.
_RUN = {"run_id": "$response.body#/id"}
_SCHEDULE = {"schedule_id": "$response.body#/id"}
LINKS: dict[tuple[str, str], dict[str, tuple[str, str, dict[str, str]]]] = {
    ("post", "/api/runs"): {
        "GetRun": ("get", "/api/runs/{run_id}", _RUN),
        "GetCurves": ("get", "/api/runs/{run_id}/curves", _RUN),
        "CancelRun": ("delete", "/api/runs/{run_id}", _RUN),
    },
    ("post", "/api/schedules"): {
        "GetSchedule": ("get", "/api/schedules/{schedule_id}", _SCHEDULE),
        "PatchSchedule": ("patch", "/api/schedules/{schedule_id}", _SCHEDULE),
        "DeleteSchedule": ("delete", "/api/schedules/{schedule_id}", _SCHEDULE),
    },
}


def _link(document: dict[str, Any]) -> None:
    paths = document["paths"]
    for (method, path), links in LINKS.items():
        answers = paths[path][method]["responses"]
        for code, answer in answers.items():
            if code.startswith("2"):
                answer["links"] = {
                    name: {"operationId": paths[to][verb]["operationId"], "parameters": params}
                    for name, (verb, to, params) in links.items()
                }


ERROR_CONTENT = {
    "content": {
        "application/json": {"schema": {"$ref": f"#/components/schemas/{ErrorBody.__name__}"}}
    }
}


def _error(code: int, *, json_route: bool) -> dict[str, Any]:
    if json_route:
        return {"model": ErrorBody, "description": ERRORS[code]}
    # FastAPI would give an error the media type of the route's answer (an HTML page).
    return {"description": ERRORS[code], **ERROR_CONTENT}


def _signed_in_errors() -> dict[int | str, Any]:
    # Signed in without a Bench.* role, or not an agent on /api/agent/*: 403.
    return {code: {"description": ERRORS[code], **ERROR_CONTENT} for code in (401, 403)}


class RouterArgs(TypedDict):
    """An APIRouter's keyword arguments that document its sign-in."""

    dependencies: list[Any]  # FastAPI's Security(...) markers
    responses: dict[int | str, Any]  # OpenAPI response objects, by status


class RouteArgs(TypedDict, total=False):
    """A route decorator's keyword arguments (FastAPI's) that :func:`doc` writes."""

    response_class: type[Response]
    status_code: int
    response_model: type[BaseModel] | None
    responses: dict[int | str, Any]  # OpenAPI response objects, by status
    openapi_extra: dict[str, Any] | None  # an OpenAPI operation fragment


# A router of signed-in operations (an API key or an Entra ID token: either will do).
SIGNED_IN: RouterArgs = {
    "dependencies": [Security(API_KEY), Security(ENTRA_ID)],
    "responses": _signed_in_errors(),
}


def doc(
    ok: type[BaseModel] | None,
    *,
    status: int = 200,
    errors: Iterable[int] = (),
    body: bool = False,
    also: Mapping[int, type[BaseModel]] | None = None,
    headers: Mapping[str, Any] | None = None,
    binary: str | None = None,
    html: str | None = None,
    download: str | None = None,
) -> RouteArgs:
    """FastAPI's route arguments for an operation: its answer's model ``ok`` (FastAPI's
    ``response_model``: the answer is serialized through it) with ``status`` (no content
    when ``ok`` is None), other successful answers ``also`` (a handler sets the status),
    the error statuses it can answer, whether it reads a JSON ``body`` (its model: the
    handler's parameter; 413 past its cap), or raw bytes of media type ``binary``.
    ``html`` describes an answer that is an HTML page instead of JSON, ``download`` one of
    raw bytes (its description)."""
    responses: dict[int | str, Any] = {code: {"model": m} for code, m in (also or {}).items()}
    for code in (status, *responses) if headers else ():
        responses[code] = {**responses.get(code, {}), "headers": dict(headers or {})}
    page = html is not None or download is not None
    if page:
        responses[status] = _page(html, download)
    # Every JSON body is read with a size cap (functions/params.read_body): 413 over it.
    for code in (*errors, *((413,) if body else ())):
        responses[code] = _error(code, json_route=not page)
    return {
        **({"response_class": HTMLResponse if html is not None else Response} if page else {}),
        "status_code": status,
        "response_model": None if page else ok,
        "responses": responses,
        "openapi_extra": None if binary is None else {"requestBody": _raw_body(binary)},
    }


BINARY = {"schema": {"type": "string", "format": "binary"}}


def _page(html: str | None, download: str | None) -> dict[str, Any]:
    """An answer that is an HTML page (its description) or raw gzip bytes."""
    if html is not None:
        return {"description": html}
    return {"description": download, "content": {"application/gzip": BINARY}}


def _raw_body(media_type: str) -> dict[str, Any]:
    return {"required": True, "content": {media_type: BINARY}}


# Swagger UI groups operations by their first tag, in this order: what people call first,
# the agents' own protocol apart at the end (no person calls it).
TAGS: list[dict[str, str]] = [
    {
        "name": "runs",
        "description": "Submit, follow, list and cancel benchmark runs; each "
        "client's result, the curves and the comparison of two runs",
    },
    {
        "name": "live",
        "description": "Live: a run's figures per second while it measures, relayed from "
        "fio's status output; never its results",
    },
    {"name": "reports", "description": "Runs, series and comparisons as self-contained HTML"},
    {
        "name": "series and regressions",
        "description": "Comparable results over time, the changes found in them and their triage",
    },
    {"name": "schedules", "description": "Runs started on a cron schedule"},
    {
        "name": "catalogue and targets",
        "description": "Workload profiles and the targets agents mount",
    },
    {
        "name": "agents and pools",
        "description": "The agent registry and the pools' sizes and cost, as people read them",
    },
    {"name": "chat doors", "description": "Signed webhooks for Teams and other chat tools"},
    {
        "name": "admin",
        "description": "Delete a run or a series whole; move runs and schedules between "
        "deployments",
    },
    {"name": "service", "description": "Liveness"},
    {
        "name": "agent protocol",
        "description": "Called by the agents only (each signed in as "
        "itself): registration, claims, the start barrier, heartbeats, failures, artifacts and "
        "results. Not for people or pipelines.",
    },
]


def build(app: FastAPI) -> dict[str, Any]:
    document = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
        tags=TAGS,
    )
    # FastAPI documents a 422 for every operation with parameters: the API answers 400.
    for name in ("HTTPValidationError", "ValidationError"):
        document["components"]["schemas"].pop(name, None)
    for path, operations in document["paths"].items():
        for operation in operations.values():
            operation["responses"].pop("422", None)
            # FastAPI writes no security for an open operation; the document says it is open.
            operation.setdefault("security", [])
            if path == "/api/bot/webhook":
                # FastAPI lists each security dependency as an alternative; both are needed.
                operation["security"] = [{"WebhookSignature": [], "WebhookTimestamp": []}]
    _link(document)
    return document


def install(app: FastAPI) -> None:
    """Serve :func:`build`'s document (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build(app)
        document: dict[str, Any] = app.openapi_schema
        return document

    app.openapi = openapi  # type: ignore[method-assign]
