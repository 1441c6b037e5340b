"""The sign-in middleware: every /api/ and /ui route but the open ones needs a caller
(functions/auth.py), found once per request and kept in ``request.state.caller``; the
agents' protocol is for agents only. A person's page without a session goes to the
sign-in form.

Plain ASGI, not Starlette's ``BaseHTTPMiddleware`` (``app.middleware("http")``), which runs
each request's rest in a task group behind memory streams: 7 % of the API's CPU while
1,000 clients stored their results (issue 29), for a check that reads only headers."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

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


class Authenticate:
    """Finds the caller of each request to a route that needs one, or answers for it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = _refused(Request(scope))  # its state is the scope's: routes see it
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _refused(request: Request) -> Response | None:
    """The answer to a request without the caller its route needs; None to go on (with
    ``request.state.caller`` set where the route needs one)."""
    path = request.url.path
    if _open(path) or not (path.startswith("/api/") or _page(path)):
        return None
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
    return None
