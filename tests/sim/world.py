"""The simulated world: the real core services (intake, protocol, lifecycle, admission, the
timer) over the in-memory ports (core.memory), one clock, the faults injected into every
storage call, and what callers were told.

Everything that would differ between two runs of one sequence is fixed here: run ids come
from a counter, timestamps from the simulated clock.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from core.fleet.pools import PoolConfig
from core.memory import Effect, MemoryArtifacts, MemoryQueues, MemoryStore, SimClock
from core.runs.service import RunService

POOL = "sim"
TARGETS = ("a", "b", "c")
AGENTS = 4
VISIBILITY_S = 6
MAX_DELIVERIES = 3
HANG_S = 5.0  # what a call to a paused server costs its caller before it gives up
START = 1_900_000_000.0
T = TypeVar("T")


class SimCrash(BaseException):
    """The API process died in the middle of a call (a BaseException: no ``except
    Exception`` in the service may swallow it, as none can swallow a SIGKILL)."""


@dataclass
class Faults:
    """What happens to each storage call (core.memory's fault hook)."""

    clock: SimClock
    db_paused: bool = False
    queue_paused: bool = False
    flaky_ops: int = 0  # the next this many calls may fail or lose their answer
    fail_every: int = 0  # ... every n-th fails
    lose_every: int = 0  # ... every n-th is done and its answer lost
    crash_in: int | None = None  # the call dies at its n-th storage operation
    pause_in: int | None = None  # the database pauses at the next call's n-th operation
    seen: int = 0

    def __call__(self, op: str, table: str, key: str) -> Effect:
        self.seen += 1
        if self.pause_in is not None and table not in ("queue", "artifacts"):
            self.pause_in -= 1
            if self.pause_in <= 0:  # SIGSTOP in the middle of a call, as the did
                self.pause_in, self.db_paused = None, True
        if self.crash_in is not None:
            self.crash_in -= 1
            if self.crash_in <= 0:
                self.crash_in = None
                raise SimCrash(f"crashed before {op} {table}/{key}")
        paused = self.queue_paused if table == "queue" else self.db_paused
        if paused and table != "artifacts":
            self.clock.advance(HANG_S)  # the caller waited for its timeout
            return "defer" if op in ("create", "replace", "upsert", "send") else "fail"
        if self.flaky_ops > 0:
            self.flaky_ops -= 1
            if self.fail_every and self.seen % self.fail_every == 0:
                return "fail"
            if self.lose_every and self.seen % self.lose_every == 0:
                return "lost"
        return "ok"


@dataclass
class PostRecord:
    """One POST /api/runs and what its caller was told."""

    index: int
    body: int
    key: str | None
    run_id: str | None = None
    outcome: str = ""  # ok | refused | unavailable | no answer


@dataclass
class World:
    clock: SimClock = field(default_factory=lambda: SimClock(START))
    faults: Faults = field(init=False)
    store: MemoryStore = field(init=False)
    queues: MemoryQueues = field(init=False)
    artifacts: MemoryArtifacts = field(init=False)
    apis: list[RunService] = field(default_factory=list)
    posts: list[PostRecord] = field(default_factory=list)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    minted: list[str] = field(default_factory=list)  # run ids made by the current POST
    # (item, agent, created, the item's holder just before) of each result call answered
    results_stored: list[tuple[str, str, bool, str | None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.faults = Faults(self.clock)
        self.store = MemoryStore(self.clock, self.faults)
        self.queues = MemoryQueues(self.clock, self.faults)
        self.queues.ensure_pool(POOL)
        self.artifacts = MemoryArtifacts(self.faults)
        self.apis = [self.new_api(), self.new_api()]

    def new_api(self) -> RunService:
        """An API instance (a restart makes a new one: nothing kept in its memory)."""
        return RunService(
            self.store,
            self.queues,
            self.artifacts,
            clock=self.clock,
            pools=(POOL,),
            pool_configs=(PoolConfig(name=POOL, size=AGENTS),),
            max_deliveries=MAX_DELIVERIES,
        )

    def new_run_id(self) -> str:
        run_id = f"r-{next(self._ids):032x}"
        self.minted.append(run_id)
        return run_id

    def api_call(self, api: int, call: Callable[[RunService], T], crash_in: int | None) -> T:
        """One call to API instance ``api``; ``crash_in``: it dies at that storage call, and
        the instance is restarted (whatever it kept in memory is gone)."""
        self.faults.crash_in = crash_in
        try:
            return call(self.apis[api])
        except SimCrash:
            self.apis[api] = self.new_api()
            raise
        finally:
            self.faults.crash_in = None

    def resume(self) -> None:
        self.faults.db_paused = self.faults.queue_paused = False
        self.store.tables.apply_deferred()
        self.queues.apply_deferred()


def _deterministic(world: World) -> Iterator[tuple[Any, str, object]]:
    """Every module attribute to replace for the simulation, with its replacement."""
    for name, module in list(sys.modules.items()):
        if not (name.startswith("core.") and module is not None):
            continue
        if getattr(module, "new_run_id", None) is not None:
            yield module, "new_run_id", world.new_run_id


@contextlib.contextmanager
def simulated(world: World) -> Iterator[World]:
    """Run ids from the world for the duration (restored after); timestamps come from the
    world's clock, which the services are given (core.timestamps)."""
    saved = [(m, a, getattr(m, a)) for m, a, _ in _deterministic(world)]
    for module, attr, value in _deterministic(world):
        setattr(module, attr, value)
    try:
        yield world
    finally:
        for module, attr, value in saved:
            setattr(module, attr, value)
