"""Many simulated clients in one process: one asyncio loop runs them, a pool of threads
makes their blocking calls (the agent's API client and queue adapter), and each one
registers in the registry and beats as an agent does (agent.beacon), as a simulated host:
``os`` and ``version`` say "simulated", its mounts' file system type too.

Each client has its own API client and queue client, as each agent on its own VM has: the
calls, connections and counts are a real fleet's, only the hosts are not.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import httpx

from adapters import counting
from adapters.queue import WorkQueues
from adapters.storage import READ_TIMEOUT_S
from agent.api_client import ApiClient
from core.errors import BenchError
from core.models import HostFacts
from core.models.agents import AgentMount, Registration
from core.units import parse_size
from simagent.client import HEARTBEAT_S, Record, SimClient
from simagent.figures import DeclaredRate
from simagent.measured import SIM_FSTYPE, Measurements

log = logging.getLogger(__name__)
T = TypeVar("T")
SIMULATED = "simulated"
FLEET_IDLE_POLLS_PER_S = 50.0
# The idle polls' slots are counted per tick this long (FLEET_IDLE_POLLS_PER_S x this each).
IDLE_TICK_S = 0.1
# The registry's beats, all clients together, at most this often (each declares the longer
# ``heartbeat_s`` it beats at, which the registry's liveness follows): a thousand clients
# at 30 s were 33 a second, and retried every 2 s when refused (issue 29: 750-1,150 a
# minute of the one API process's 15-20 requests a second).
FLEET_REGISTRY_BEATS_PER_S = 5.0
FLEET_REGISTER_RETRIES_PER_S = 20.0
MAX_HEARTBEAT_S = 3600.0  # the longest a registration may declare (Registration)
# A held item's heartbeats, all clients together, at most this often: each beats every
# second as the agent does (agent.lease) up to this many clients, then less often (a
# thousand beating every second would ask the local API 1,000 times a second).
FLEET_ITEM_BEATS_PER_S = 100.0
# Threads for the held items' lease calls (renewals and heartbeats), apart from the others':
# an agent renews its message on a thread of its own (agent.lease), so a renewal never
# waits behind its own or another client's uploads (issue 29: at 1,000 clients on one
# pool, renewals queued behind artifact puts past the visibility timeout, and 89 messages
# were delivered again).
LEASE_THREADS = 64
# Threads for the barrier's calls (the ready report and the polls until "go"), apart from
# the others' too: an agent polls on its own thread, so its poll never waits behind other
# clients' claims and uploads, while on one pool of 128 a thousand clients' polls (200 a
# second, core.runs.barrier_timing) queued behind them, each client polled every ~10 s
# instead of 5, and 4-10 % heard "go" after the instant sized on their round trips (issue
# 29, 1,000 clients on 3 API instances, 2026-11-27 15:05-15:22 UTC: skew p99 219 and 440 ms).
POLL_THREADS = 256


class CountingApiClient(ApiClient):
    """The agent's API client, every request it sends counted (adapters.counting)."""

    # The clients' calls run on the fleet's threads: a thousand held barrier calls would
    # hold a thousand threads. They poll, as before held calls (its figures stay comparable).
    HOLDS_BARRIER = False

    def _send(self, method: str, path: str, body: Any = None, **kw: Any) -> dict[str, Any]:
        counting.record("api", path.split("?", 1)[0].rsplit("/", 1)[-1] or path)
        return super()._send(method, path, body, **kw)


class Pacer:
    """Lets one caller through at a time, at most ``per_s`` a second, each gap counted from
    when the one before actually went: after the event loop was held back, the callers
    waiting go on at the rate, not all at once. (Each client's first registration timed
    at its own fixed offset did that: 22-23 in one second against 20 on a loaded machine,
    2026-11-27 and 11-28.)"""

    def __init__(self, per_s: float) -> None:
        self.gap_s = 1.0 / per_s
        self.last: float | None = None
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    async def turn(self) -> None:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:  # a lock serves one loop
            self._lock = (loop, asyncio.Lock())
        async with self._lock[1]:
            if self.last is not None:
                wait = self.last + self.gap_s - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            self.last = time.monotonic()


@dataclass
class Fleet:
    """``count`` simulated clients ``<prefix>-1`` ... on ``pool``, each at ``rate``."""

    api_url: str
    queue_uri: str
    pool: str
    count: int
    rate: DeclaredRate
    targets: list[str]
    prefix: str = "sim"
    api_key: str | None = None
    local_emulators: bool = True
    visibility_timeout: int = 60
    retry_delay_s: int = 5
    idle_min_s: float = 0.25
    idle_max_s: float = 0.25
    heartbeat_s: float = 30.0
    registry_beats_per_s: float = FLEET_REGISTRY_BEATS_PER_S
    item_beats_per_s: float = FLEET_ITEM_BEATS_PER_S
    queue_timeout_s: int = READ_TIMEOUT_S
    threads: int = 64
    lease_threads: int = LEASE_THREADS
    poll_threads: int = POLL_THREADS
    records: Path | None = None
    measurements: Measurements = field(default_factory=Measurements)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _idle_slots: dict[int, int] = field(default_factory=dict)  # tick -> idle polls booked

    def __post_init__(self) -> None:
        # Idle, the fleet's clients together poll the queue at most FLEET_IDLE_POLLS_PER_S
        # times a second: each backs off from idle_min_s to this (issue 29: a thousand
        # clients at 4 polls a second each kept Azurite busy with 4,000 a second).
        self.idle_max_s = max(self.idle_max_s, self.count / FLEET_IDLE_POLLS_PER_S)
        spread = min(MAX_HEARTBEAT_S, self.count / self.registry_beats_per_s)
        self.heartbeat_s = max(self.heartbeat_s, spread)
        self.register_retry_s = min(
            self.heartbeat_s, max(2.0, self.count / FLEET_REGISTER_RETRIES_PER_S)
        )
        self.item_beat_s = max(HEARTBEAT_S, self.count / self.item_beats_per_s)
        self.first_registrations = Pacer(FLEET_REGISTER_RETRIES_PER_S)
        self.tls = httpx.create_ssl_context()  # one for all: each costs 0.3 s to load
        self.pool_threads = ThreadPoolExecutor(self.threads, thread_name_prefix="sim")
        self.lease_pool = ThreadPoolExecutor(
            min(self.count, self.lease_threads), thread_name_prefix="sim-lease"
        )
        self.poll_pool = ThreadPoolExecutor(
            min(self.count, self.poll_threads), thread_name_prefix="sim-poll"
        )
        self.host = HostFacts(
            hostname=f"{SIMULATED}-{socket.gethostname()}"[:255],
            kernel="",
            os=SIMULATED,
            cpu_count=0,
        )

    def api_client(self) -> ApiClient:
        return CountingApiClient(self.api_url, api_key=self.api_key, verify=self.tls)

    def work_queues(self) -> WorkQueues:
        return WorkQueues.connect(
            self.queue_uri,
            local_emulators=self.local_emulators,
            read_timeout_s=self.queue_timeout_s,
        )

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool_threads, partial(fn, *args))

    async def call_lease(self, fn: Callable[..., T], *args: Any) -> T:
        """A lease's call (a renewal, an item's heartbeat), on threads of their own."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.lease_pool, partial(fn, *args))

    async def call_poll(self, fn: Callable[..., T], *args: Any) -> T:
        """A barrier's call (ready, a poll), on threads of their own."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.poll_pool, partial(fn, *args))

    def shutdown(self) -> None:
        for pool in (self.pool_threads, self.lease_pool, self.poll_pool):
            pool.shutdown(wait=False, cancel_futures=True)

    def jitter(self) -> float:
        """Idle waits spread by +-20 %: a thousand clients do not poll in lockstep."""
        return random.uniform(0.8, 1.2)

    def idle_wait(self, wait_s: float) -> float:
        """How long an idle client waits before its next poll of the queue: its own backoff
        (``wait_s``), or longer, to the first tick from then with a slot left, so that the
        fleet's idle polls together come at most FLEET_IDLE_POLLS_PER_S a second while
        its clients back off too, not only once they all wait ``idle_max_s``: a thousand
        clients that ended a step together polled from ``idle_min_s`` up, 300-475 times a
        second for 10 s, 40 % of the machine while the run's last result was aggregated
        (issue 29.2, 2026-11-27 18:50 UTC; a real fleet polls from its own hosts)."""
        per_tick = max(1, int(FLEET_IDLE_POLLS_PER_S * IDLE_TICK_S))
        with self._lock:
            now = time.monotonic()
            tick = math.ceil((now + wait_s) / IDLE_TICK_S)
            while self._idle_slots.get(tick, 0) >= per_tick:
                tick += 1
            self._idle_slots[tick] = self._idle_slots.get(tick, 0) + 1
            if len(self._idle_slots) > 4 * self.count:  # forget the ticks gone by
                past = math.floor(now / IDLE_TICK_S)
                self._idle_slots = {t: n for t, n in self._idle_slots.items() if t >= past}
        return max(wait_s, tick * IDLE_TICK_S - now)

    def first_beat_phase(self) -> float:
        """How long before its lease a held item's last beat counts as sent (simagent.client):
        the whole interval in a fleet that beats every second (its first beat at the first
        tick, as the agent's), else a random share of ``item_beat_s``."""
        if self.item_beat_s <= HEARTBEAT_S:
            return math.inf
        return random.uniform(0.0, self.item_beat_s)

    @staticmethod
    def block_bytes(bs: str) -> int:
        return parse_size(bs)

    def write(self, rec: Record) -> None:
        if self.records is None:
            return
        line = json.dumps(asdict(rec)) + "\n"
        with self._lock, self.records.open("a") as f:
            f.write(line)

    def registration(self, client: SimClient, session: str, state: str) -> dict[str, Any]:
        busy = state != "stopped" and client.item_id is not None
        reg = Registration(
            agent_id=client.agent_id,
            pool=self.pool,
            session=session,
            state="busy" if busy else state,
            item_id=client.item_id if busy else None,
            mounts=[
                AgentMount(
                    alias=t,
                    path=f"/{SIMULATED}/{t}",
                    fstype=SIM_FSTYPE,
                    source=SIMULATED,
                    options="",
                    usable=True,
                )
                for t in self.targets
            ],
            engines=["fio"],
            os=SIMULATED,
            hostname=self.host.hostname,
            version=SIMULATED,
            heartbeat_s=self.heartbeat_s,
        )
        return reg.model_dump(mode="json")

    async def _beacon(self, client: SimClient, stop: asyncio.Event) -> None:
        """agent.beacon: register, then beat every ``heartbeat_s``; ``stopped`` at the end.
        The first registration waits its turn (``first_registrations``): the fleet's come
        at most FLEET_REGISTER_RETRIES_PER_S a second, not a thousand at once."""
        session = uuid.uuid4().hex
        turn = asyncio.ensure_future(self.first_registrations.turn())
        stopping = asyncio.ensure_future(stop.wait())
        await asyncio.wait((turn, stopping), return_when=asyncio.FIRST_COMPLETED)
        for waiting in (turn, stopping):
            waiting.cancel()
        while not stop.is_set():
            try:
                await self.call(client.api.register, self.registration(client, session, "idle"))
                wait = self.heartbeat_s
            except BenchError as e:
                log.warning("%s: registration failed: %s", client.agent_id, e)
                wait = self.register_retry_s
            try:
                await asyncio.wait_for(stop.wait(), wait * self.jitter())
                break
            except TimeoutError:
                continue
        try:
            await self.call(client.api.register, self.registration(client, session, "stopped"))
        except BenchError as e:
            log.warning("%s: could not say stopped: %s", client.agent_id, e)

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set; the clients then finish their current items."""
        clients = await asyncio.gather(
            *(self.call(SimClient, self, f"{self.prefix}-{i}") for i in range(1, self.count + 1))
        )
        log.info("%d simulated clients on pool %s at %s", len(clients), self.pool, self.rate)
        try:
            await asyncio.gather(
                *(c.serve(stop) for c in clients),
                *(self._beacon(c, stop) for c in clients),
            )
        finally:
            for c in clients:
                c.api.close()
            self.shutdown()
