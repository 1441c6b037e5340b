"""The API's OpenAPI document, as FastAPI writes it from the routes' declarations: each
route names its answers' models and its error statuses (:func:`doc`, as FastAPI's
``responses``); :func:`build` adds the sign-in schemes, the tags, the links,
and the 401/403 every signed-in operation can answer. Request bodies are the handlers'
typed parameters (functions/params.py). FastAPI generates every schema in one pass, so
every ``$ref`` resolves inside the document. FastAPI's 422 is dropped: the API answers
malformed input 400 like everything else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel

from functions.apidocs import ErrorBody

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
SECURITY_SCHEMES = {
    "ApiKey": {
        "type": "apiKey",
        "in": "header",
        "name": "X-Api-Key",
        "description": "BENCH_API_KEYS (local use). With neither keys nor Entra ID configured "
        "(the local stack) the API is open.",
    },
    "EntraId": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "An Entra ID token for the API's app registration, checked by App "
        "Service Authentication in front of the app (roles Bench.Reader ... Bench.Admin)",
    },
    "TeamsHmac": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "HMAC <base64 HMAC-SHA256 of the raw body>, keyed with the outgoing "
        "webhook's secret; otherwise 401",
    },
    "BotToken": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "The channel's token (Bot Framework or Entra ID), for the bot's app id, "
        "from an issuer in BENCH_BOT_ISSUERS, naming the activity's serviceUrl",
    },
    "WebhookSignature": {
        "type": "apiKey",
        "in": "header",
        "name": "X-Bench-Signature",
        "description": 'sha256=<hex HMAC-SHA256 of "<timestamp>." + body> with BENCH_BOT_SECRET',
    },
    "WebhookTimestamp": {
        "type": "apiKey",
        "in": "header",
        "name": "X-Bench-Timestamp",
        "description": "Unix seconds, within 5 minutes of now",
    },
}


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
) -> dict[str, Any]:
    """Route arguments documenting an operation: its answer ``ok`` with ``status`` (no
    content when ``ok`` is None), other successful answers ``also``, the error statuses it
    can answer, whether it reads a JSON ``body`` (its model: the handler's parameter; 413
    past its cap), or raw bytes of media type ``binary``.
    ``html`` describes an answer that is an HTML page instead of JSON, ``download`` one of
    raw bytes (its description). Answers are described, never filtered: the stored
    documents they carry are typed in the core, where they are checked."""
    responses: dict[int | str, Any] = {}
    if html is not None:
        responses[status] = {"description": html}
    if download is not None:
        raw = {"schema": {"type": "string", "format": "binary"}}
        responses[status] = {"description": download, "content": {"application/gzip": raw}}
    for code, model in {**({status: ok} if ok else {}), **(also or {})}.items():
        responses[code] = {"model": model}
        if headers:
            responses[code]["headers"] = dict(headers)
    # Every JSON body is read with a size cap (functions/params.read_body): 413 over it.
    for code in (*errors, *((413,) if body else ())):
        responses[code] = _error(code, json_route=html is None and download is None)
    extra: dict[str, Any] = {}
    if binary is not None:
        content = {binary: {"schema": {"type": "string", "format": "binary"}}}
        extra["requestBody"] = {"required": True, "content": content}
    kind: dict[str, Any] = {}
    if html is not None:
        kind["response_class"] = HTMLResponse
    if download is not None:
        kind["response_class"] = Response
    return {
        **kind,
        "status_code": status,
        "response_model": None,
        "responses": responses,
        "openapi_extra": extra or None,
    }


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
    {"name": "service", "description": "Liveness"},
    {
        "name": "agent protocol",
        "description": "Called by the agents only (each signed in as "
        "itself): registration, claims, the start barrier, heartbeats, failures, artifacts and "
        "results. Not for people or pipelines.",
    },
]


def _tag(path: str) -> str:
    if path.startswith("/api/agent/"):
        return "agent protocol"
    if path.endswith("/report"):
        return "reports"
    if path.endswith("/live"):
        return "live"
    prefixes = (
        ("/api/runs", "runs"),
        ("/api/compare", "runs"),
        ("/api/series", "series and regressions"),
        ("/api/regressions", "series and regressions"),
        ("/api/schedules", "schedules"),
        ("/api/profiles", "catalogue and targets"),
        ("/api/targets", "catalogue and targets"),
        ("/api/agents", "agents and pools"),
        ("/api/bot/", "chat doors"),
    )
    return next((tag for prefix, tag in prefixes if path.startswith(prefix)), "service")


def _security(path: str) -> list[dict[str, list[str]]]:
    if path in PUBLIC_PATHS:
        return []
    if path == "/api/bot/teams":
        return [{"TeamsHmac": []}]
    if path == "/api/bot/webhook":
        return [{"WebhookSignature": [], "WebhookTimestamp": []}]
    if path == BOT_MESSAGES:
        return [{"BotToken": []}]
    return [{"ApiKey": []}, {"EntraId": []}]


def _chat_door(path: str) -> bool:
    return path.startswith("/api/bot/") or path == BOT_MESSAGES


def build(app: FastAPI) -> dict[str, Any]:
    document = get_openapi(
        title=app.title,
        version=app.version,
        description=app.description,
        routes=app.routes,
    )
    schemas = document["components"]["schemas"]
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    document["components"]["securitySchemes"] = SECURITY_SCHEMES
    _link(document)
    error = ERROR_CONTENT
    document["tags"] = TAGS
    for path, operations in document["paths"].items():
        for operation in operations.values():
            operation["tags"] = [_tag(path)]
            answers = operation["responses"]
            answers.pop("422", None)
            operation["security"] = _security(path)
            if operation["security"]:
                answers.setdefault("401", {"description": ERRORS[401], **error})
            if operation["security"] and not _chat_door(path):
                # Signed in without a Bench.* role, or not an agent on /api/agent/*.
                answers.setdefault("403", {"description": ERRORS[403], **error})
    return document


def install(app: FastAPI) -> None:
    """Serve :func:`build`'s document (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build(app)
        document: dict[str, Any] = app.openapi_schema
        return document

    app.openapi = openapi  # type: ignore[method-assign]
