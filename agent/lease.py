"""The message lease: keeps a received message invisible while its item runs (renewing
its visibility at half the timeout, always with the newest pop receipt), sends the item's
heartbeats (with fio's live samples, agent.live) and relays cancellation.

The lease is lost when the item may be someone else's: the queue refuses the pop receipt
(another agent received the message, or it is gone), the API refuses a heartbeat (the item
is no longer this agent's), or neither the queue (a renewal) nor the API (an accepted
heartbeat) has confirmed it for a whole visibility timeout. A queue that merely cannot be
reached is not a lost lease while the API, which decides who holds an item, still accepts
this agent's heartbeats: nobody else can receive the message from a queue service that is
down, and the chaos test's surviving client was failed when it gave up its finished
measurement during an Azurite restart (docs/agent.md, "The lease")."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from adapters.queue import LeaseLost, Message, WorkQueues
from agent.api_client import ApiError
from core.errors import BenchError, StoreUnavailable
from core.models.live import LiveSample

log = logging.getLogger(__name__)


def sleep_until(instant_s: float) -> None:
    """Sleep to an absolute wall-clock instant: long sleeps first, then short ones, so the
    wake-up lands within about a millisecond without spinning for long."""
    while True:
        remaining = instant_s - time.time()
        if remaining <= 0:
            return
        time.sleep(remaining - 0.002 if remaining > 0.004 else remaining / 2)


# The item's heartbeat, which also tells the agent its run was cancelled: the docs promise
# fio stopped within 2 s of the DELETE, so the heartbeat that hears it comes at most 1 s
# after it, and fio gets the rest to stop (tests/test_agent_cancel.py: the worst moment).
HEARTBEAT_S = 1.0


class LiveSource(Protocol):
    """What the heartbeat relays while fio runs (agent.live.LiveRelay)."""

    def pending(self) -> list[LiveSample]: ...
    def sent(self, samples: list[LiveSample]) -> None: ...


class Lease:
    """Keeps a received message invisible while the item runs, and relays cancellation."""

    def __init__(
        self,
        queues: WorkQueues,
        pool: str,
        message: Message,
        timeout_s: int,
        heartbeat: Callable[[list[LiveSample]], bool],
        heartbeat_every_s: float = HEARTBEAT_S,
    ) -> None:
        self._queues, self._pool, self._timeout = queues, pool, timeout_s
        self._message = message
        self._heartbeat = heartbeat
        self._beat_every = min(heartbeat_every_s, timeout_s / 2)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.lost = threading.Event()
        self.cancelled = threading.Event()
        self._news = threading.Event()  # set with lost or cancelled: wakes ``wait``
        self._renewed_at = time.monotonic()
        self._confirmed_at: float | None = None  # the API's last accepted heartbeat
        self._thread = threading.Thread(target=self._run, name="lease", daemon=True)
        self.heartbeats = False
        # Set once the item's engine is released at its step's instant (agent.worker): until
        # then a heartbeat says it is waiting (the API reads no step for it).
        self.released = False
        # Set once fio measures (agent.fio_item): its samples ride on the heartbeat, so the
        # live view costs no request of its own.
        self.live: LiveSource | None = None

    @property
    def message(self) -> Message:
        with self._lock:
            return self._message

    def start(self, *, heartbeats: bool = False) -> None:
        self.heartbeats = heartbeats
        if not self._thread.is_alive():
            self._thread.start()

    def wait(self, timeout_s: float) -> None:
        """Sleep up to ``timeout_s``, waking at once when the lease is lost or cancelled."""
        self._news.wait(timeout_s)

    def _lose(self) -> None:
        self.lost.set()
        self._stop.set()
        self._news.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(min(self._beat_every, self._timeout / 2)):
            now = time.monotonic()
            if now - self._renewed_at >= self._timeout / 2:
                self._renew(now)
            if self.heartbeats and not self.lost.is_set():
                live = self.live
                try:
                    samples = live.pending() if live is not None else []
                    if self._heartbeat(samples):
                        self.cancelled.set()
                        self._news.set()
                    self._confirmed_at = time.monotonic()  # the item is still ours
                    if live is not None:
                        live.sent(samples)
                except ApiError as e:
                    if e.status not in (404, 409):
                        log.warning("heartbeat refused: %s", e)
                        continue
                    # The run or item is gone, or the item is no longer ours: stop fio and
                    # write nothing, as when the lease is lost.
                    log.error("heartbeat: %s; stopping", e)
                    self._lose()
                except BenchError as e:
                    log.warning("heartbeat failed: %s", e)

    def _renew(self, now: float) -> None:
        try:
            renewed = self._queues.renew(self._pool, self.message, self._timeout)
        except LeaseLost as e:
            log.error("%s", e)
            self._lose()
            return
        except StoreUnavailable as e:
            # Transient: retry on the next beat. Once the visibility has run out the message
            # may be someone else's, unless the API has said since that the item is ours.
            if now - self._renewed_at >= self._timeout and not self._confirmed(now):
                log.error("could not renew before the visibility timeout ran out: %s", e)
                self._lose()
            return
        with self._lock:
            self._message = renewed
        self._renewed_at = now

    def _confirmed(self, now: float) -> bool:
        """Whether the API accepted a heartbeat within the last visibility timeout."""
        return self._confirmed_at is not None and now - self._confirmed_at < self._timeout
