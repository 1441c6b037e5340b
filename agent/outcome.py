"""How a queue message ended for this agent: logged per message, and recorded on the item's
span as ``bench.outcome`` (agent.tracing). The values are the words the logs and traces
have always shown."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    COMPLETED = "completed"  # the result is stored and the message deleted
    FAILED = "failed"  # a failed attempt reported: handed back, or final when permanent
    # This VM's mount is down: a failed attempt, handed back, and a pause before the next
    # poll so that the pool's other agents take the item first.
    MOUNT_DOWN = "failed: mount down, handed back"
    RELEASED = "released"  # handed back untouched (the claim said not now; a clean order)
    DROPPED = "dropped"  # deleted: the claim said the item needs no run, or no agent can
    MALFORMED = "malformed"  # deleted: not a message our API sends
    CLEANED = "cleaned"  # a clean order carried out (benchctl clean)
    ABORTED = "aborted"  # the step's start barrier was aborted
    CANCELLED = "cancelled"  # the run was cancelled while the item waited or ran
    INTERRUPTED = "interrupted"  # the agent was told to stop now: handed back at once
    LEASE_LOST = "lease lost"  # another agent may hold the item now: nothing is reported
    ERROR = "error"  # the store or the report failed: the message comes back by itself
