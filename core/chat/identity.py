"""Who is talking to the Teams bot, and what they may do (pure).

Teams names the user by their Entra object id (``from.aadObjectId``); their Bench.* app role
assignments on the API's registration (read from Microsoft Graph by adapters/graph_roles.py)
give the same role the REST API gives them, so the bot's guardrails are the API's own. A
user with no role is refused politely, told which role to ask for.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import FieldError
from core.runs.guardrails import ROLE_ORDER, Caller, best_role

BOT_DOOR = "bot-m365"
APP_ROLE = {r: f"Bench.{r.capitalize()}" for r in ROLE_ORDER}
# The least role each bot action needs: the role its REST call needs.
NEEDS = {
    "run": "runner",  # POST /api/runs
    "rerun": "runner",  # POST /api/runs with the run's request
    "cancel": "runner",  # DELETE /api/runs/{id}: a runner its own runs
    "subscribe": "reader",  # the series' regressions, as GET /api/regressions shows them
    "unsubscribe": "reader",
}
READ_ROLE = "reader"  # status, compare, profiles, targets, schedules: GET calls


@dataclass(frozen=True)
class ChatUser:
    object_id: str  # Entra object id (Teams: from.aadObjectId)
    name: str  # display name, for messages only
    tenant_id: str = ""


@dataclass(frozen=True)
class DirectoryEntry:
    """What the directory says of a user: the name the REST API knows them by (their user
    principal name, as App Service Authentication passes it) and their Bench.* app roles."""

    principal_name: str
    app_roles: tuple[str, ...]


def caller_of(user: ChatUser, entry: DirectoryEntry, default_role: str | None) -> Caller | None:
    """The user as the API would see them: their highest Bench.* role, else the service's
    default role (BENCH_DEFAULT_ROLE), else None (no access). Named as the API names them,
    so a run started in Teams is theirs to cancel from the CLI too (never by display name)."""
    role = best_role(list(entry.app_roles), default_role or "")
    if not role:
        return None
    return Caller(name=entry.principal_name or f"aad:{user.object_id}", role=role, door=BOT_DOOR)


def needed_role(action: str) -> str:
    return NEEDS.get(action, READ_ROLE)


def allowed(caller: Caller | None, action: str) -> bool:
    if caller is None:
        return False
    return ROLE_ORDER.index(caller.role) >= ROLE_ORDER.index(needed_role(action))


def refusal(user: ChatUser, caller: Caller | None, action: str) -> str:
    """What a user who may not do ``action`` is told: kindly, with the role to ask for."""
    role = APP_ROLE[needed_role(action)]
    first = user.name.split()[0] if user.name.strip() else "there"
    if caller is None:
        return (
            f"Sorry {first}, you have no role in the benchmark service yet. Ask its owners "
            f"to assign you the {role} app role, then try again."
        )
    return (
        f"Sorry {first}, {action} needs the {role} app role and you have "
        f"{APP_ROLE.get(caller.role, caller.role)}. Ask the service's owners for {role}."
    )


def higher_role_hint(caller: Caller, errors: list[FieldError]) -> str | None:
    """After a guardrail refusal that names the caller's role (too many clients, a write
    test, a long run): the next role up, which has larger limits."""
    if not any(f"role {caller.role}" in e.message for e in errors):
        return None
    i = ROLE_ORDER.index(caller.role)
    if i + 1 >= len(ROLE_ORDER):
        return None
    return f"ask the service's owners for {APP_ROLE[ROLE_ORDER[i + 1]]} for larger runs"
