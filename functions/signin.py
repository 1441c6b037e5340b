"""The sign-in middleware: every /api/ and /ui route but the open ones needs a caller
(functions/auth.py), found once per request and kept in ``request.state.caller``; the
agents' protocol is for agents only. A person's page without a session goes to the
sign-in form."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from starlette.middleware.base import RequestResponseEndpoint

from core.errors import FieldError
from functions import errors
from functions.auth import Unauthorized, resolve_caller
from functions.openapi import BOT_MESSAGES, PUBLIC_PATHS
from functions.params import services


def _open(path: str) -> bool:
    """Routes anyone may call: liveness, the API's description and its assets, and the
    chat doors, which check their own signatures (functions/bot.py, functions/messages.py)."""
    return (
        path in PUBLIC_PATHS
        or path == BOT_MESSAGES
        or path.startswith(("/api/bot/", "/api/docs/assets/"))
        or path == "/ui/signin"
    )


def _page(path: str) -> bool:
    return path == "/ui" or path.startswith("/ui/")


async def authenticate(request: Request, call_next: RequestResponseEndpoint) -> Response:
    path = request.url.path
    if _open(path) or not (path.startswith("/api/") or _page(path)):
        return await call_next(request)
    settings = services(request).settings
    try:
        get = request.method == "GET"
        caller = resolve_caller(request.headers, settings, allow_cookie=get)
    except Unauthorized as e:
        if _page(path) and e.status == 401:  # a person: to the sign-in form
            return RedirectResponse("/ui/signin?error=true", status_code=303)
        return errors.error_response(e.status, [FieldError(e.field, str(e))])
    if path.startswith("/api/agent/") and not caller.is_agent:
        return errors.error_response(403, [FieldError("(caller)", "agents only")])
    request.state.caller = caller
    return await call_next(request)
