"""The seeded scheduler of the simulation: it draws one action at a time from a seeded
random generator, does it, and checks the invariants. An action is plain data (kind and
numbers), so a recorded sequence replays exactly, with or without the generator; the
shrinker (tests/sim/shrink.py) cuts a failing one down.

Actions: POSTs (with or without an Idempotency-Key, the same key again, another body under
a key, an invalid body), an agent's next step (claim, ready, barrier polls, heartbeats,
its result or a retryable or final failure, its lease), agents dying and coming back, time
passing (leases run out: redeliveries; barriers expire), timer ticks on either of two API
instances, cancels, API restarts, a call that dies half-way, the database paused (between
calls or in the middle of one; its writes held and applied when it resumes, after their
callers heard a failure), the queue paused,
stretches of failing calls and of calls whose answer is lost.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.errors import BenchError, Conflict, Forbidden, StoreUnavailable, ValidationFailed
from core.runs.commit import ANSWER_MS, Answer
from tests.sim import invariants
from tests.sim.agents import SimAgent
from tests.sim.world import AGENTS, POOL, PostRecord, SimCrash, World, simulated

WORKLOAD = {"rw": "randread", "bs": "4k", "size": "8m", "runtime": 2, "iodepth": 4}
BODIES: list[dict[str, Any]] = [
    {"target": "a"},
    {"target": "b"},
    {"target": "a", "clients": 2, "barrier_timeout_s": 5},
    {"targets": ["b", "c"]},
    {"target": "c", "clients": [1, 2], "barrier_timeout_s": 5},
    {"target": "a", "on_busy": "refuse"},
    {"target": "b", "workload": {**WORKLOAD, "bs": "not a size"}},  # refused: 400
]
KEYS = 6  # keys are drawn from a few, so that they come back (with other bodies too)


def body(index: int) -> dict[str, Any]:
    b: dict[str, Any] = {"pool": POOL, "workload": dict(WORKLOAD)}
    b.update(BODIES[index % len(BODIES)])
    return b


@dataclass(frozen=True)
class Action:
    kind: str
    a: int = 0
    b: int = 0
    c: int = 0

    def __repr__(self) -> str:
        return f"A({self.kind!r}, {self.a}, {self.b}, {self.c})"


A = Action  # what a recorded sequence is written with


@dataclass
class Sim:
    world: World = field(default_factory=World)
    agents: list[SimAgent] = field(
        default_factory=lambda: [SimAgent(f"sim-agent-{i}") for i in range(AGENTS)]
    )
    crash_next: int | None = None
    trace: list[str] = field(default_factory=list)
    drawn: list[Action] = field(default_factory=list)

    # ---- doing one action ---------------------------------------------------------------

    def do(self, action: Action) -> str:
        crash, self.crash_next = self.crash_next, None
        kind, a, b, c = action.kind, action.a, action.b, action.c
        w = self.world
        if kind == "post":
            return self._post(a, b, crash)
        if kind == "agent":
            return self.agents[a % len(self.agents)].step(w, b % 2, crash, c)
        if kind == "tick":
            return self._tick(a % 2, crash)
        if kind == "advance":
            w.clock.advance(a / 1000)
            return f"+{a} ms"
        if kind == "cancel":
            return self._cancel(a, b % 2, crash)
        if kind == "pause":
            w.faults.db_paused = True
            return "database paused"
        if kind == "pause_in":
            w.faults.pause_in = a
            return f"the database pauses at the next call's storage call {a}"
        if kind == "queue_pause":
            w.faults.queue_paused = True
            return "queue paused"
        if kind == "resume":
            w.resume()
            return "resumed"
        if kind == "flaky":
            w.faults.flaky_ops, w.faults.fail_every, w.faults.lose_every = a, b, c
            return f"next {a} calls: every {b}th fails, every {c}th loses its answer"
        if kind == "crash":
            self.crash_next = a
            return f"the next call dies at its storage call {a}"
        if kind == "restart":
            w.apis[a % 2] = w.new_api()
            return f"API {a % 2} restarted"
        if kind == "die":
            agent = self.agents[a % len(self.agents)]
            agent.alive = False
            agent.forget()
            return f"{agent.id} died"
        if kind == "return":
            agent = self.agents[a % len(self.agents)]
            agent.alive = True
            return f"{agent.id} is back"
        raise ValueError(f"unknown action {kind}")

    def _post(self, index: int, key: int, crash: int | None) -> str:
        w = self.world
        idem = None if key == 0 else f"sim-key-{key % KEYS}"
        record = PostRecord(len(w.posts), index, idem)
        w.posts.append(record)
        w.minted.clear()
        answer = Answer(w.clock.ms() + ANSWER_MS, w.clock)
        api = (index + key) % 2
        try:
            run, _ = w.api_call(api, lambda s: s.submit(body(index), idem, answer=answer), crash)
            record.run_id = run.id
            # The handler answers at the deadline unless the creation committed by then.
            record.outcome = "ok" if answer.committed or not answer.abandon() else "unavailable"
        except (ValidationFailed, Forbidden, Conflict):
            record.outcome = "refused"
        except StoreUnavailable:
            record.outcome = "unavailable"
        except SimCrash:
            record.outcome = "no answer"
        if record.run_id is None:
            from core.models.ids import run_id_for_key

            record.run_id = w.minted[-1] if w.minted else (run_id_for_key(idem) if idem else None)
        return f"POST body {index} key {idem}: {record.outcome} {record.run_id}"

    def _tick(self, api: int, crash: int | None) -> str:
        try:
            done = self.world.api_call(api, lambda s: s.tick(), crash)
            return f"tick: finalized {len(done)}"
        except StoreUnavailable as e:
            return f"tick incomplete: {e}"
        except SimCrash:
            return "tick died"

    def _cancel(self, pick: int, api: int, crash: int | None) -> str:
        known = [p.run_id for p in self.world.posts if p.run_id and p.outcome == "ok"]
        if not known:
            return "nothing to cancel"
        run_id = known[pick % len(known)]
        try:
            self.world.api_call(api, lambda s: s.cancel(run_id), crash)
            return f"cancelled {run_id}"
        except (StoreUnavailable, SimCrash, Conflict) as e:
            return f"cancel of {run_id}: {type(e).__name__}"

    # ---- running a sequence ---------------------------------------------------------------

    def run(self, actions: Sequence[Action] | Iterator[Action], settle: bool = True) -> int:
        """Do each action and check the invariants after it; then, with ``settle``, stop
        the faults and let the agents finish. Returns the number of steps done."""
        logging.disable(logging.CRITICAL)  # the service logs every injected failure
        done = 0
        try:
            with simulated(self.world):
                for action in actions:
                    self.trace.append(f"{action!r}: {self._checked(action)}")
                    invariants.check(self.world)
                    done += 1
                if settle:
                    done += self.settle()
        finally:
            logging.disable(logging.NOTSET)
        return done

    def _checked(self, action: Action) -> str:
        """Any exception other than the answers a caller may get is a bug."""
        try:
            return self.do(action)
        except invariants.Violation:
            raise
        except (BenchError, SimCrash) as e:
            raise invariants.Violation("an error escaped", f"{type(e).__name__}: {e}") from e
        except Exception as e:
            raise invariants.Violation("a crash", f"{type(e).__name__}: {e}") from e

    def settle(self, max_steps: int = 4_000, quiet_steps: int = 400) -> int:
        """Faults stop, dead agents come back, the agents work, time passes and the timer
        ticks: every run must end within ``max_steps`` (about 40 simulated minutes), and
        something must change at least every ``quiet_steps`` (4 minutes: longer than any
        deadline the service waits for) until then."""
        w = self.world
        w.faults.flaky_ops, w.faults.pause_in, self.crash_next = 0, None, None
        w.resume()
        for agent in self.agents:
            agent.alive = True
        steps, quiet, last = 0, 0, self._fingerprint()
        for steps in range(1, max_steps + 1):
            for i in range(len(self.agents)):
                self.trace.append(f"settle {steps}: {self._checked(A('agent', i, 0, 3))}")
            self._checked(A("tick", steps % 2))
            w.clock.advance(0.6)
            invariants.check(w)
            now = self._fingerprint()
            quiet = quiet + 1 if now == last else 0
            last = now
            if (steps % 10 == 0 and _all_ended(w)) or quiet >= quiet_steps:
                break
        invariants.settled(w)
        return steps

    def _fingerprint(self) -> tuple[int, int]:
        """Changes whenever anything is written or a message is sent or taken."""
        w = self.world
        messages = sum(m.dequeue_count + 1 for q in w.queues.queues.values() for m in q)
        return w.store.tables.writes, messages


def _all_ended(world: World) -> bool:
    try:
        invariants.settled(world)
        return True
    except invariants.Violation:
        return False


# ---- drawing actions ----------------------------------------------------------------------


def draw(rng: random.Random, sim: Sim) -> Action:
    """One action, drawn with weights that keep the world busy but not flooded."""
    w = sim.world
    choices: list[tuple[float, str]] = [
        (9, "post"),
        (45, "agent"),
        (10, "tick"),
        (14, "advance"),
        (1.5, "cancel"),
        (0.8 if not w.faults.db_paused else 0, "pause"),
        (1.2 if not w.faults.db_paused else 0, "pause_in"),
        (0.4 if not w.faults.queue_paused else 0, "queue_pause"),
        (8 if (w.faults.db_paused or w.faults.queue_paused) else 0, "resume"),
        (2, "flaky"),
        (2, "crash"),
        (0.7, "restart"),
        (1, "die"),
        (3 if any(not a.alive for a in sim.agents) else 0, "return"),
    ]
    kind = rng.choices([k for _, k in choices], weights=[wt for wt, _ in choices])[0]
    if kind == "post":
        return A("post", rng.randrange(len(BODIES)), rng.choice([0, 0, 0, *range(1, KEYS + 1)]))
    if kind == "agent":
        return A("agent", rng.randrange(AGENTS), rng.randrange(2), rng.randrange(1000))
    if kind == "advance":
        return A("advance", rng.choice([100, 500, 1_000, 2_000, 4_000, 7_000, 31_000, 130_000]))
    if kind == "flaky":
        return A("flaky", rng.randrange(5, 60), rng.choice([0, 2, 3, 5]), rng.choice([0, 2, 3, 4]))
    if kind in ("crash", "pause_in"):
        return A(kind, rng.randrange(1, 12))
    if kind in ("tick", "restart", "die", "return"):
        return A(kind, rng.randrange(AGENTS))
    if kind == "cancel":
        return A("cancel", rng.randrange(1000), rng.randrange(2))
    return A(kind)


def actions(seed: int, steps: int, sim: Sim) -> Iterator[Action]:
    rng = random.Random(seed)
    for _ in range(steps):
        action = draw(rng, sim)
        sim.drawn.append(action)
        yield action
