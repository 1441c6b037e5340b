"""Who may report on a work item (pure).

An agent's report (ready, barrier, heartbeat, failure, cancelled, result) is accepted only
from the agent that holds the item, in a state where that report makes sense; anything
else is refused with :class:`NotHolder` (HTTP 409) and changes nothing.

The agent's identity comes from its credential where there is one: a per-agent API key
names the agent; a managed identity proves only the pool's agent when the agents of a pool
share it, so its object id is recorded with the item as ``principal`` and must match, while
the ``agent_id`` the agent gives keeps agents of one pool apart. In open local mode there is
no credential and the agent id is the one given.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.errors import Conflict
from core.models.stored import Item


@dataclass(frozen=True)
class AgentRef:
    id: str  # the agent id: a key's name, or what the agent says (managed identity, open)
    principal: str | None = None  # what its credential proves; None in open local mode


class NotHolder(Conflict):
    """A report from an agent that does not hold the item, or in a state where it may not
    send it (HTTP 409); nothing was changed."""


def holds(item: Item, agent: AgentRef) -> bool:
    """Whether ``agent`` is the agent the item was last given to (whatever its state)."""
    return item.agent_id == agent.id and item.principal == agent.principal


def refuse(item: Item, agent: AgentRef, report: str) -> NotHolder:
    if not holds(item, agent):
        return NotHolder(f"{report} refused: agent {agent.id} does not hold item {item.id}")
    return NotHolder(f"{report} refused: item {item.id} is {item.state}")
