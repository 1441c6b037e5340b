"""Every error the API answers has one shape, ``{"errors": [{"field", "message"}]}``, and
no input gets a 5xx: the domain's errors map to 4xx here, FastAPI's parameter validation
and Starlette's routing errors are rewritten to that shape (400, not FastAPI's 422), and
only a backing service that failed answers 503."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match

from core.errors import (
    BenchError,
    Conflict,
    FieldError,
    Forbidden,
    NotFound,
    StoreUnavailable,
    TooLarge,
    ValidationFailed,
)
from core.validation import field_errors
from functions.inputs import shown

log = logging.getLogger(__name__)
MAX_MESSAGE = 500  # a message quoting a huge input is cut: the field already says where


def error_response(
    status: int, errors: list[FieldError], headers: Mapping[str, str] | None = None
) -> JSONResponse:
    body = [
        {
            "field": shown(e.field),
            "message": (e.message if len(e.message) <= MAX_MESSAGE else e.message[:497] + "...")
            .encode("utf-8", "backslashreplace")
            .decode("utf-8"),
        }
        for e in errors
    ]
    return JSONResponse({"errors": body}, status_code=status, headers=dict(headers or {}))


def allowed_methods(request: Request) -> str:
    """Every method some route takes at this path (Starlette names only the first route
    that matched: PUT /api/runs said "Allow: POST", hiding GET)."""
    methods: set[str] = set()
    for route in _leaves(request.app.router.routes):
        match, _ = route.matches(request.scope)
        if match != Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


def _leaves(routes: Iterable[BaseRoute]) -> Iterator[BaseRoute]:
    """The routes, those of included routers too (FastAPI keeps an included router as one
    entry; ours are included without a prefix, so their paths match as they are)."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _leaves(inner.routes)
        else:
            yield route


def _param(loc: tuple[int | str, ...]) -> str:
    """FastAPI's error location as the caller named it: limit, Idempotency-Key, run_id, a
    body path (workload.bs), or (body)."""
    where, *rest = loc
    if where == "body" and not rest:  # the body as a whole: not an object, or none
        return "(body)"
    name = ".".join(str(p) for p in rest) or str(where)
    if where == "header":
        return "-".join(part.capitalize() for part in name.split("-"))
    return name


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _params(_: Request, e: RequestValidationError) -> JSONResponse:
        errors = [
            FieldError(_param(tuple(err["loc"])), f.message)
            for err, f in zip(e.errors(), field_errors(e.errors()), strict=True)
        ]
        return error_response(400, errors)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, e: HTTPException) -> JSONResponse:
        field = {404: "(path)", 405: "(method)"}.get(e.status_code, "(request)")
        headers = dict(e.headers or {})
        if e.status_code == 405:
            headers["Allow"] = allowed_methods(request)
        return error_response(e.status_code, [FieldError(field, str(e.detail))], headers)

    @app.exception_handler(Forbidden)
    async def _forbidden(_: Request, e: Forbidden) -> JSONResponse:
        return error_response(403, e.errors)

    @app.exception_handler(ValidationFailed)
    async def _bad(_: Request, e: ValidationFailed) -> JSONResponse:
        return error_response(400, e.errors)

    @app.exception_handler(NotFound)
    async def _missing(_: Request, e: NotFound) -> JSONResponse:
        return error_response(404, [FieldError(e.field, f"not found: {e}")])

    @app.exception_handler(Conflict)
    async def _conflict(_: Request, e: Conflict) -> JSONResponse:
        return error_response(409, [FieldError("(request)", str(e))])

    @app.exception_handler(TooLarge)
    async def _too_large(_: Request, e: TooLarge) -> JSONResponse:
        return error_response(413, [FieldError("(body)", str(e))])

    @app.exception_handler(StoreUnavailable)
    async def _down(_: Request, e: StoreUnavailable) -> JSONResponse:
        log.error("backing service failed: %s", e)
        message = f"{e.service} is unavailable (no answer in time); retry"
        return error_response(503, [FieldError("(service)", message)])

    @app.exception_handler(BenchError)
    async def _busy(_: Request, e: BenchError) -> JSONResponse:
        # What is left is the service's own trouble, e.g. a document that kept changing
        # under compare-and-swap: transient, so "retry" like a failed backing service.
        log.error("request failed: %s", e)
        return error_response(503, [FieldError("(service)", f"{e}; retry")])

    @app.exception_handler(Exception)
    async def _bug(_: Request, e: Exception) -> JSONResponse:
        log.exception("unexpected error", exc_info=e)
        return error_response(500, [FieldError("(service)", "internal error")])
