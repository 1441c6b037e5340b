"""What an error while handling an item means for the item: its message and whether a
retry could ever get past it (pure).

No error ends the agent (agent.worker): whatever an item's path raises becomes a reported
failure of that attempt, with the OS's own words. A filesystem that is full (of bytes or
of inodes), over quota, read-only, or that refuses this agent access is still so when
the item comes back a few seconds later, on this agent or another of the pool (they
mount the same target): such a failure is permanent, and the run fails on the first
delivery instead of after every retry.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.engines.fio_check import PERMANENT_ERRNOS


@dataclass(frozen=True)
class Failure:
    message: str
    permanent: bool


def permanent_errno(code: int | None) -> bool:
    return code in PERMANENT_ERRNOS


def os_message(e: OSError) -> str:
    """The OS's words with the path: "[Errno 28] No space left on device: '/mnt/x/f1'"."""
    return str(e)


def item_failure(e: BaseException, doing: str = "") -> Failure:
    """The failure an exception raised while handling an item reports: an OSError keeps
    the OS's message and is permanent by its errno; anything else is the agent's own
    fault (a bug) and may pass on a retry, perhaps on another agent."""
    prefix = f"{doing}: " if doing else ""
    if isinstance(e, OSError):
        return Failure(prefix + os_message(e), permanent_errno(e.errno))
    return Failure(f"{prefix}internal error in the agent: {type(e).__name__}: {e}", False)
