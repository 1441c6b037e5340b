"""When a step's clients start (pure): how often an agent waiting at the start barrier asks,
how long the API holds a barrier call that asks to wait, and the lead from "all ready" to the
common start instant, from the agents' measured round trips. Shared by the API
(core.runs.protocol sets the instant, functions.agent_api holds the calls) and the agent."""

from __future__ import annotations

import math

# Without the agents' round trips (an agent that reports none): the lead between "all ready"
# and the start instant, for every agent to hear it, plus 50 ms per client.
BARRIER_LEAD_MS = 1500
# After an agent hears "go": waking to write fio's start FIFO at the instant. fio itself is
# started and its jobs parked on that FIFO before the agent reports ready (agent.fio_item).
WAKE_MS = 25
# A client that hears "go" up to this late still starts on the common instant (at once, so
# still within the aggregation's 1 s start-skew bound); a later one gets an instant of its own.
REJOIN_LATE_MS = 500
# A large step's agents together poll the barrier at most this often (barrier_poll_ms).
STEP_POLLS_PER_S = 200
# The share of a step's clients the lead is sized to reach before the instant.
COVERED_PCT = 99
# A held barrier call (issue 29.3): the API keeps an agent's barrier call until its step's
# start instant is set, the step fails or its deadline passes, or at most MAX_WAIT_MS (the
# agent sends its next call when a quarter of the last one's is left, OVERLAP_MS, so that
# one is always held); each API
# process reads a step it holds calls for once every WATCH_MS, whatever the number of calls
# (core.runs.barrier_watch), and answers them all.
WATCH_MS = 50
MAX_WAIT_MS = 5000
OVERLAP_MS = MAX_WAIT_MS // 4
# Held calls: what a step's clients report is how long their last "go" took, on their last
# step; this step's may take longer, with the load (issue 29.3 at 32 agents on 2 cores: the
# slowest go of a step took 2.6 times the slowest of the step before, and one agent heard
# the instant 124 ms after it). The lead covers that go once more, up to this much.
GO_MARGIN_MAX_MS = 100


def barrier_poll_ms(clients: int) -> int:
    """How often an agent waiting at a step's barrier asks (agent.worker): every 100 ms in
    a small step, for a fast start, slower in a larger one, so that a step's agents
    together ask at most 40 times a second until every agent polls every 250 ms; beyond 50
    clients, together at most STEP_POLLS_PER_S times a second (issue 29: 100 clients at 4
    polls a second each held the API's answers back by seconds, and the lead, sized on
    those round trips, grew to 22 s)."""
    return max(min(250, max(100, 25 * clients)), clients * 1000 // STEP_POLLS_PER_S)


def barrier_lead_ms(
    clients: int, round_trips: list[int], fixed_ms: int, *, held: bool = False
) -> int:
    """Time from "all ready" to the start instant, for every agent to hear it and start
    fio. From the agents' measured round trips when each reported one: the client that
    completes the set hears "go" in its own answer (within its round trip); the others at
    their next poll (every ``barrier_poll_ms``), so the poll interval and twice the slowest
    round trip cover a poll sent just before the instant was set and the answer to the next.
    Otherwise ``fixed_ms`` plus 50 ms per client.

    The round trip it covers is the 99th percentile's (nearest rank): the slowest in a
    step of up to 99 clients, not the few slowest of a thousand, whose slow answers would
    hold every client back (issue 29: the lead followed the slowest round trip). Those few
    hear "go" late by their own extra round trip and still start at once, within the
    REJOIN_LATE_MS the barrier grants.

    ``held``: every client waits in held calls (it said so with its ready report): from its
    ready report on, the agent always has a barrier call held at the API (the first sent
    with the ready report, the next while the last is still held, agent.barrier_wait), so
    it hears "go" when its API process next reads the step (within WATCH_MS) and answers
    it, within a round trip (the read of its item, the answer's way back); the first call,
    if it reaches the API after the instant was set, answers "go" within the round trip of
    a call sent before it. No poll interval, and not twice the round trip (a call sent
    OVERLAP_MS before the last one's bound passes reaches the API before it unless its way
    there is OVERLAP_MS slower). And a margin of that once more, up to GO_MARGIN_MAX_MS:
    the go a client reports was timed on its last step, under that step's load."""
    if not round_trips or len(round_trips) < clients:
        return fixed_ms + 50 * clients
    ordered = sorted(round_trips)
    covered = ordered[math.ceil(COVERED_PCT / 100 * len(ordered)) - 1]
    if clients == 1:
        hear = covered
    elif held:
        hear = WATCH_MS + covered + min(covered, GO_MARGIN_MAX_MS)
    else:
        hear = barrier_poll_ms(clients) + 2 * covered
    return hear + WAKE_MS
