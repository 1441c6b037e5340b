"""The local stack's pool scaler (core.fleet.scaling.PoolScaler): an elastic pool's capacity
is its number of agent processes. Raising it starts agents like ``benchctl local up`` does
(same mounts, same settings), lowering it stops the newest ones with SIGTERM (an agent
finishes its item, tells the registry it stopped, and exits). The API's timer calls it;
the stack's state file (``stack.json``) records the processes, so ``benchctl local down``
stops them too."""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path

from benchctl.localstack import Proc, Stack, start_agent

log = logging.getLogger(__name__)


class LocalScaler:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._stopping: set[int] = set()  # told to stop, finishing (a 2nd SIGTERM is "now")

    def _stack(self) -> Stack:
        stack = Stack.load(self.directory)
        if stack is None:
            raise RuntimeError(f"no local stack in {self.directory}")
        return stack

    def _agents(self, stack: Stack, pool: str) -> list[Proc]:
        return [
            p
            for p in stack.agents()
            if p.pool == pool and p.alive() and p.pid not in self._stopping
        ]

    def capacity(self, pool: str) -> int:
        return len(self._agents(self._stack(), pool))

    def set_capacity(self, pool: str, capacity: int) -> None:
        with self._lock:
            stack = self._stack()
            running = self._agents(stack, pool)
            for _ in range(len(running), capacity):
                name = f"{pool}-e{len(stack.procs)}"
                p = start_agent(stack, name, pool=pool)
                log.info("pool %s: started agent %s (pid %d)", pool, p.name, p.pid)
            for p in reversed(running[capacity:]):
                self._stopping.add(p.pid)
                log.info("pool %s: stopping agent %s (pid %d)", pool, p.name, p.pid)
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
