"""Who may change what someone started (pure).

Runners cancel their own runs, change their own schedules and triage the regressions first
seen on their own runs; engineers and admins act on anyone's; readers on nothing.
"""

from __future__ import annotations

from core.errors import FieldError, Forbidden
from core.runs.guardrails import Caller


def may_act_on(caller: Caller, owner: str | None) -> bool:
    if caller.limits.manage:  # engineers and admins
        return True
    return caller.limits.max_clients > 0 and owner is not None and owner == caller.name


def check_owner(caller: Caller, owner: str | None, field: str, what: str) -> None:
    """Raise Forbidden naming ``field`` (where the owner is recorded) unless ``caller``
    may act on ``what``, owned by ``owner``."""
    if may_act_on(caller, owner):
        return
    if caller.limits.max_clients == 0:
        message = f"role {caller.role} may not change {what}"
    else:
        message = (
            f"role {caller.role} may change only its own; {what} belongs to {owner or 'nobody'}"
        )
    raise Forbidden([FieldError(field, message)])
