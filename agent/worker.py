"""The agent's loop: poll the pool's queue, hold the message while fio runs, report, delete.

One item at a time. The message stays invisible to other agents while this one renews its
visibility at half the timeout, always with the newest pop receipt; when a renewal fails the
lease is lost, fio is stopped and nothing is written (another agent will redo the item).
The message is deleted only after the API has stored the result. (rq's worker loop is the
model: ``work(once=..., max_items=...)`` so tests drive the real loop; first SIGTERM
finishes the current item, a second stops now.)"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path

from pydantic import ValidationError

from adapters.queue import LeaseLost, Message, WorkQueues
from agent import handover, tracing
from agent.api_client import ApiClient, ApiError
from agent.barrier_wait import hear_start
from agent.beacon import Beacon
from agent.cleanup import after_item, carry_out, parse_order, remove_stale_trees
from agent.config import AgentConfig
from agent.diskspd_item import DiskSpdEngine
from agent.engine import Engine
from agent.failures import item_failure
from agent.fio_clock import fio_clock
from agent.fio_item import FioEngine
from agent.fio_runner import safe_name
from agent.hostfacts import host_facts
from agent.item_checks import mount_down, refusal
from agent.layout import ItemFailed
from agent.lease import Lease, sleep_until
from agent.mounts import MountWatch
from agent.outcome import Outcome
from agent.queue_return import after_outage
from agent.workdir import WorkRoot
from core.errors import StoreUnavailable
from core.models import ArtifactName, HostFacts, Result, WorkItem
from core.runs.clean import CleanOrder

log = logging.getLogger(__name__)
MOUNT_DOWN_PAUSE_S = 5.0


class Worker:
    def __init__(
        self,
        config: AgentConfig,
        queues: WorkQueues,
        api: ApiClient,
        *,
        fio_binary: str | None = None,
    ) -> None:
        self.config = config
        self.queues = queues
        self.api = api
        self.fio_binary = fio_binary or config.fio_binary
        # Asked once, here, not in a step's start-up (agent.fio_clock).
        self.fio_clock = fio_clock(self.fio_binary)
        self.mounts = MountWatch(config.mounts)
        self.stop_after_current = threading.Event()
        self.stop_now = threading.Event()
        self._host = host_facts(use_imds=config.imds)
        self.beacon: Beacon | None = None  # the registry heartbeat (agent.beacon), if any
        self.trace = tracing.NO_TRACE  # the current item's spans (agent.tracing)
        # Per process and locked (agent.workdir): opened by ``work``, so a Worker that
        # never works makes no directory.
        self._work = WorkRoot(
            Path(config.work_dir or tempfile.gettempdir())
            / ("benchagent-" + safe_name(config.agent_id))
        )

    @property
    def work_root(self) -> Path:
        return self._work.path

    @property
    def host(self) -> HostFacts:
        return self._host

    def request_stop(self) -> None:
        """First call: finish the current item, then exit. Second call: stop now."""
        if self.stop_after_current.is_set():
            self.stop_now.set()
        self.stop_after_current.set()

    def work(self, *, once: bool = False, max_items: int | None = None) -> int:
        """Poll and process until stopped; ``once`` returns after one poll, ``max_items``
        after that many items. Returns the number of items handled."""
        self._work.open()
        try:
            return self._loop(once=once, max_items=max_items)
        finally:
            self._work.close()

    def _loop(self, *, once: bool, max_items: int | None) -> int:
        handled = 0
        idle = self.config.idle_min_s
        while not self.stop_after_current.is_set():
            msg = None
            try:
                # With no usable mount, take no item: another agent may serve it.
                if self.mounts.usable():
                    msg = self.queues.receive(self.config.pool, self.config.visibility_timeout)
            except StoreUnavailable as e:
                log.warning("queue unavailable: %s", e)
                if not once:  # let the leases of items held elsewhere be renewed first
                    after_outage(self.queues, self.config.pool, self.stop_after_current)
                    continue
            except Exception:  # crash-only: the loop outlives any poll
                log.exception("polling the queue failed")
            if msg is None:
                if once:
                    break
                # Idle: wait idle_min_s, doubling up to idle_max_s (by default both 0.25 s).
                self.stop_after_current.wait(idle)
                idle = min(idle * 2, self.config.idle_max_s)
                continue
            idle = self.config.idle_min_s
            try:
                outcome = self.process(msg)
            except Exception:  # crash-only: no item ends the agent
                # process() reports what an item raises; this is a failure of that report
                # itself: the message comes back after its visibility timeout.
                log.exception("message %s", msg.id)
                outcome = Outcome.ERROR
            log.info("message %s: %s", msg.id, outcome)
            handled += 1
            if outcome is Outcome.MOUNT_DOWN:
                # Let the pool's other agents take the item back first: polling again at
                # once, this agent would spend every delivery on a mount it cannot use.
                self.stop_after_current.wait(self.config.retry_delay_s + MOUNT_DOWN_PAUSE_S)
            if once or (max_items is not None and handled >= max_items):
                break
        return handled

    def process(self, msg: Message) -> Outcome:
        pool = self.config.pool
        order = parse_order(msg.content)
        if order is not None:
            return self._clean(msg, order)
        try:
            item = WorkItem.model_validate_json(msg.content)
        except ValidationError as e:
            # Our API never sends such a message; keeping it would only loop forever.
            log.error("dropping malformed message %s: %s", msg.id, e)
            self._delete(msg)
            return Outcome.MALFORMED
        me = self.config.agent_id
        lease = Lease(
            self.queues,
            pool,
            msg,
            self.config.visibility_timeout,
            heartbeat=lambda live: self.api.heartbeat(item, me, live, waiting=not lease.released),
        )
        lease.start()
        if self.beacon is not None:
            self.beacon.item_id = item.item_id
        try:
            # Transient API failures are retried while the lease is held (agent.api_client).
            with (
                self.api.retry_until(lease.lost),
                tracing.item(item, self.config.agent_id, msg) as self.trace,
            ):
                outcome = self._run_item(item, lease)
                self.trace.outcome = outcome.value
                return outcome
        except ApiError as e:
            # The API refused a call (a 4xx): say so on the item, so the run shows the cause.
            log.error("item %s: %s", item.item_id, e)
            try:
                return self._failed(item, lease, f"the API refused this agent's call: {e}")
            except (StoreUnavailable, ApiError) as again:
                log.error("could not report the failure: %s", again)
                return Outcome.ERROR
        except StoreUnavailable as e:
            log.error("item %s: %s; it will be redelivered", item.item_id, e)
            return Outcome.ERROR
        except Exception as e:  # crash-only: no item ends the agent
            # Whatever the item's path raised (a full or read-only target, a bug): a failed
            # attempt with the OS's own words, permanent when no retry can get past it.
            log.exception("item %s", item.item_id)
            if lease.lost.is_set():
                return Outcome.LEASE_LOST  # someone else may hold the item now: report nothing
            failure = item_failure(e)
            with self.api.retry_until(lease.lost):
                return self._failed(item, lease, failure.message, permanent=failure.permanent)
        finally:
            lease.stop()
            if self.beacon is not None:
                self.beacon.item_id = None

    def _run_item(self, item: WorkItem, lease: Lease) -> Outcome:
        agent = self.config.agent_id
        msg = lease.message
        t0 = time.perf_counter()
        self.trace.stage("claim")
        decision = self.api.claim(item, agent, msg.dequeue_count, msg.id)
        t_claimed = time.perf_counter()
        if decision.action == "drop":
            log.info("dropping %s: %s", item.item_id, decision.reason)
            self._delete(lease.message)
            return Outcome.DROPPED
        if decision.action != "run":
            log.info("handing back %s: %s", item.item_id, decision.reason)
            self._release(lease, self.config.retry_delay_s)
            return Outcome.RELEASED
        self.trace.stage("layout")  # the checks, the files, the engine started at its gate
        config = self.config
        refused = refusal(item, agent, config.mounts, self.fio_binary, config.diskspd_binary)
        if refused:
            return self._failed(item, lease, refused, permanent=True)
        down = mount_down(item, agent, self.mounts)
        if down:
            # This VM's mount may come back, and another VM of the pool may serve the item
            # now: an attempt that failed, handed back, never a measurement (issue 13.2).
            self._failed(item, lease, down)
            return Outcome.MOUNT_DOWN
        remove_stale_trees(item, config.mounts, config.path)
        log.info("item %s: claim %.0f ms", item.item_id, (t_claimed - t0) * 1000)
        lease.start(heartbeats=True)
        work_dir = self.work_root / safe_name(item.item_id)
        shutil.rmtree(work_dir, ignore_errors=True)
        return self._run_engine(self._engine(item, work_dir), item, lease, t_claimed)

    def _engine(self, item: WorkItem, work_dir: Path) -> Engine:
        if item.engine == "diskspd":
            return DiskSpdEngine(item, work_dir, config=self.config, host=self.host)
        return FioEngine(
            item,
            work_dir,
            config=self.config,
            mounts=self.mounts,
            host=self.host,
            fio_binary=self.fio_binary,
            fio_clock=self.fio_clock,
        )

    def _run_engine(
        self, engine: Engine, item: WorkItem, lease: Lease, t_claimed: float
    ) -> Outcome:
        """Measure, then upload the artifacts and store the result; a failed attempt is
        reported with its message (agent.layout.ItemFailed)."""
        try:
            scheduled = self._measure(engine, item, lease, t_claimed)
            if isinstance(scheduled, Outcome):
                return scheduled
            measured = engine.collect(scheduled)
        except ItemFailed as e:
            return self._failed(item, lease, str(e), permanent=e.permanent)
        result, receipts = self._upload(item, measured.result, measured.artifacts)
        return self._store(item, result, lease, engine.work_dir, receipts)

    def _measure(
        self, engine: Engine, item: WorkItem, lease: Lease, t_claimed: float
    ) -> int | Outcome:
        """Prepare, report ready, start at the step's instant and wait for the end: returns
        the instant (Unix ms), or why the item stopped. The engine is stopped on every way
        out."""
        try:
            engine.prepare()
            t_ready = time.perf_counter()
            scheduled = self._await_start(item, lease)
            log.info(
                "item %s: checks and layout %.0f ms, barrier %.0f ms",
                item.item_id,
                (t_ready - t_claimed) * 1000,
                (time.perf_counter() - t_ready) * 1000,
            )
            if isinstance(scheduled, Outcome):
                return scheduled
            # The lead's margin (core.runs.barrier_timing), which bench/start_skew.py reads.
            early = scheduled - time.time() * 1000
            log.info("item %s: heard the start %.0f ms before it", item.item_id, early)
            sleep_until(scheduled / 1000)
            self.trace.stage(engine.stage)
            lease.released = True
            lease.live = engine.start()
            return self._wait_for(engine, lease, item) or scheduled
        finally:
            engine.stop()

    def _clean(self, msg: Message, order: CleanOrder) -> Outcome:
        outcome = carry_out(order, msg.dequeue_count, self.config, self.mounts)
        if outcome is not Outcome.RELEASED:
            self._delete(msg)
            return outcome
        try:
            self.queues.renew(self.config.pool, msg, self.config.retry_delay_s)
        except (LeaseLost, StoreUnavailable) as e:
            log.warning("could not hand back clean %s: %s", order.id, e)
        return outcome

    def _upload(
        self, item: WorkItem, result: Result, packed: dict[ArtifactName, bytes]
    ) -> tuple[Result, dict[str, str]]:
        """Large outputs go to Blob Storage through the API before the result names them
        (small ones it carries: core.artifacts.uploads), with the API's receipts."""
        self.trace.stage("result upload")  # ends with the result stored (_store)
        return handover.prepared(self.api, item, self.config.agent_id, result, packed)

    def _await_start(self, item: WorkItem, lease: Lease) -> int | Outcome:
        """The start barrier: report ready, wait until every client of the step is, and
        return the common start instant (Unix ms), or why this item stops."""
        self.trace.stage("barrier wait")
        agent = self.config.agent_id
        barrier = hear_start(self.api, item, agent, lambda: self._interrupted(lease, item))
        if isinstance(barrier, Outcome):
            return barrier
        if barrier.status != "go":
            log.info("step of %s aborted: %s", item.item_id, barrier.reason)
            self._delete(lease.message)
            self._tidy(item, ended=True)
            return Outcome.ABORTED
        assert barrier.start_at_ms is not None, "the API sends a start instant with every go"
        return barrier.start_at_ms

    def _wait_for(self, engine: Engine, lease: Lease, item: WorkItem) -> Outcome | None:
        """Wait for the engine to finish; returns why it was stopped, or None when it ended."""
        while engine.poll() is None:
            stop = self._interrupted(lease, item, engine)
            if stop:
                return stop
            lease.wait(0.2)
        return Outcome.LEASE_LOST if lease.lost.is_set() else None

    def _store(
        self, item: WorkItem, result: Result, lease: Lease, work_dir: Path, receipts: dict[str, str]
    ) -> Outcome:
        """Delete the message only once the API has stored the result."""
        handover.put(self.api, item, self.config.agent_id, result, receipts)
        lease.stop()
        self._delete(lease.message)
        shutil.rmtree(work_dir, ignore_errors=True)
        return Outcome.COMPLETED

    def _interrupted(
        self, lease: Lease, item: WorkItem, engine: Engine | None = None
    ) -> Outcome | None:
        """Checks, while waiting or running, whether to stop; returns why, or None."""
        if lease.lost.is_set():
            if engine is not None:
                engine.stop()
            return Outcome.LEASE_LOST  # someone else may hold the item now: write nothing
        if lease.cancelled.is_set():
            if engine is not None:
                engine.stop()
            self.api.cancelled(item, self.config.agent_id)
            self._delete(lease.message)
            self._tidy(item, ended=True)
            return Outcome.CANCELLED
        if self.stop_now.is_set():
            if engine is not None:
                engine.stop()
            self._release(lease, 0)  # let another agent take it at once
            return Outcome.INTERRUPTED
        return None

    def _failed(
        self, item: WorkItem, lease: Lease, message: str, *, permanent: bool = False
    ) -> Outcome:
        """Report a failed attempt; a permanent one (no retry can succeed) is final at once."""
        final = self.api.failure(item, self.config.agent_id, message, permanent=permanent)
        self._tidy(item, ended=final)
        if final:
            self._delete(lease.message)
        else:
            self._release(lease, self.config.retry_delay_s)
        return Outcome.FAILED

    def _tidy(self, item: WorkItem, *, ended: bool) -> None:
        """Remove what the attempt wrote on its targets that no later attempt or phase
        needs (agent.cleanup); never raises."""
        after_item(item, self.config.agent_id, self.config.mounts, self.config.path, ended=ended)

    def _delete(self, msg: Message) -> None:
        try:
            self.queues.delete(self.config.pool, msg)
        except LeaseLost as e:
            # Already stored; a redelivery is dropped at claim because the item is done.
            log.warning("%s", e)

    def _release(self, lease: Lease, delay_s: int) -> None:
        lease.stop()
        try:
            self.queues.renew(self.config.pool, lease.message, delay_s)
        except (LeaseLost, StoreUnavailable) as e:
            log.warning("could not release message: %s", e)
