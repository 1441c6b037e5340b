"""Who is calling the REST API.

In Azure, App Service Authentication validates the Entra ID token in front of the app and
passes the principal in ``X-MS-CLIENT-PRINCIPAL`` (it strips that header from what clients
send). Locally, ``X-Api-Key`` against BENCH_API_KEYS; with neither configured the API is
open (the local stack) and every caller is an admin. The bot routes authenticate by HMAC
and never come here.
"""

from __future__ import annotations

import base64
import hmac
import json
from http.cookies import CookieError, SimpleCookie
from typing import Any

from adapters.config import Settings
from core.errors import BenchError, FieldError, Forbidden
from core.models.holder import AgentRef
from core.runs.guardrails import AGENT_ROLE, DOORS, LOCAL_CALLER, Caller, best_role

# Doors a REST caller may name itself; "schedule" and the bots are set by the service.
SELF_DECLARED_DOORS = ("api", "pipeline", "cli")
OBJECT_ID_CLAIM = "http://schemas.microsoft.com/identity/claims/objectidentifier"
# An agent signed in with its managed identity is named after the identity's object id.
# (A key's name cannot contain ":", so the two never clash.)
MANAGED_IDENTITY_PREFIX = "agent:"
assert set(SELF_DECLARED_DOORS) <= set(DOORS)


class Unauthorized(BenchError):
    """HTTP 401."""

    status = 401
    field = "(auth)"


class NoAppRole(Unauthorized):
    """HTTP 403: signed in, but no Bench.* app role and no default role configured."""

    status = 403
    field = "(caller)"


def _door(headers: Any) -> str:
    door = str(headers.get("x-bench-door", "api")).lower()
    return door if door in SELF_DECLARED_DOORS else "api"


def _principal(headers: Any) -> dict[str, Any] | None:
    raw = headers.get("x-ms-client-principal")
    if not raw:
        return None
    try:
        data: dict[str, Any] = json.loads(base64.b64decode(raw))
        return data
    except ValueError:
        raise Unauthorized("unreadable X-MS-CLIENT-PRINCIPAL") from None


API_KEY_COOKIE = "bench_api_key"  # set by the web UI's sign-in form (functions/reports_api.py)


def _cookie_key(headers: Any) -> str:
    try:
        jar = SimpleCookie(str(headers.get("cookie", "")))
    except CookieError:
        return ""
    morsel = jar.get(API_KEY_COOKIE)
    return morsel.value if morsel else ""


def resolve_caller(headers: Any, settings: Settings, *, allow_cookie: bool = False) -> Caller:
    """The caller of a REST request; raises Unauthorized. With ``allow_cookie`` (GET
    requests: reads only, so a cross-site form cannot act with it) the API key may also
    come as the web UI's cookie."""
    door = _door(headers)
    if settings.trust_easyauth:
        principal = _principal(headers)
        if principal is not None:
            return _signed_in(principal, headers, settings, door)
    if settings.api_keys:
        return _keyed(headers, settings, door, allow_cookie=allow_cookie)
    if settings.trust_easyauth:
        raise Unauthorized("not signed in")
    return Caller(name=LOCAL_CALLER.name, role=LOCAL_CALLER.role, door=door, is_agent=True)


def _signed_in(principal: dict[str, Any], headers: Any, settings: Settings, door: str) -> Caller:
    """The caller App Service Authentication signed in: an agent's managed identity, or a
    person or pipeline with its best Bench.* role (NoAppRole without one)."""
    claims = principal.get("claims") or []
    role_type = principal.get("role_typ", "roles")
    roles = [str(c.get("val")) for c in claims if c.get("typ") == role_type]
    oid = headers.get("x-ms-client-principal-id") or next(
        (str(c.get("val")) for c in claims if c.get("typ") in (OBJECT_ID_CLAIM, "oid")),
        "",
    )
    name = headers.get("x-ms-client-principal-name") or oid or "unknown"
    if oid and oid in settings.agent_principals:
        agent = MANAGED_IDENTITY_PREFIX + oid
        return Caller(name=agent, role=AGENT_ROLE, door="api", is_agent=True)
    role = best_role(roles, settings.default_role or "")
    if not role:  # no role means no access (BENCH_DEFAULT_ROLE unset)
        raise NoAppRole(f"{name} has no Bench.* app role for this API")
    return Caller(name=name, role=role, door=door)


def _keyed(headers: Any, settings: Settings, door: str, *, allow_cookie: bool) -> Caller:
    """The caller whose API key (X-Api-Key, or the web UI's cookie) is in BENCH_API_KEYS."""
    given = str(headers.get("x-api-key", "")) or (_cookie_key(headers) if allow_cookie else "")
    for name, role, key in settings.api_keys:
        if given and hmac.compare_digest(given.encode(), key.encode()):
            return Caller(name=name, role=role, door=door, is_agent=role == AGENT_ROLE)
    raise Unauthorized("missing or unknown X-Api-Key")


def agent_ref(caller: Caller, agent_id: str) -> AgentRef:
    """Which agent is reporting: proved by its credential where it has one.

    - A per-agent API key names the agent: the ``agent_id`` it gives must be that name.
    - A managed identity may be shared by every agent of a pool, so it proves the pool's
      agent, not which one: its object id is recorded with the item and must match, and the
      ``agent_id`` given keeps the agents of the pool apart (see the docs, security).
    - Open local mode has no credential: the ``agent_id`` given is all there is.
    """
    if caller.role != AGENT_ROLE:
        return AgentRef(agent_id)
    if caller.name.startswith(MANAGED_IDENTITY_PREFIX):
        return AgentRef(agent_id, principal=caller.name)
    if agent_id != caller.name:
        raise Forbidden(
            [
                FieldError(
                    "agent_id",
                    f"this API key belongs to agent {caller.name}, not {agent_id!r} "
                    f"(start the agent with --agent-id {caller.name})",
                )
            ]
        )
    return AgentRef(agent_id, principal=caller.name)
