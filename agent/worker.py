"""The agent's loop: poll the pool's queue, hold the message while fio runs, report, delete.

One item at a time. The message stays invisible to other agents while this one renews its
visibility at half the timeout, always with the newest pop receipt; when a renewal fails the
lease is lost, fio is stopped and nothing is written (another agent will redo the item).
The message is deleted only after the API has stored the result. (rq's worker loop is the
model: ``work(once=..., max_items=...)`` so tests drive the real loop; first SIGTERM
finishes the current item, a second stops now.)
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from pathlib import Path

from pydantic import ValidationError

from adapters.queue import LeaseLost, Message, WorkQueues
from agent import metadata, tracing
from agent.api_client import ApiClient, ApiError
from agent.beacon import Beacon
from agent.config import AgentConfig
from agent.counters import CounterSampler
from agent.dataset import read_only_files
from agent.diskspd_item import run_diskspd
from agent.diskspd_runner import DiskSpdProcess
from agent.fio_runner import FioProcess, safe_name
from agent.hostfacts import host_facts
from agent.item_checks import mount_down, refusal
from agent.layout import ItemFailed, lay_out
from agent.lease import Lease, sleep_until
from agent.mounts import MountWatch, mount_changes
from core.artifacts import pack_json, pack_timeline, ref
from core.engines.fio_check import fio_messages, measurement_problems, rejection
from core.engines.fio_logs import timeline_from_logs
from core.engines.results import build_result
from core.errors import StoreUnavailable
from core.models import ArtifactName, ArtifactRef, HostFacts, Result, WorkItem
from core.runs.barrier_timing import barrier_poll_ms

log = logging.getLogger(__name__)
MOUNT_DOWN = "failed: mount down, handed back"
MOUNT_DOWN_PAUSE_S = 5.0
PARK_TIMEOUT_S = 5.0  # fio's start-up before ready; a slower one starts late (its skew shows)


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
        self.mounts = MountWatch(config.mounts)
        self.stop_after_current = threading.Event()
        self.stop_now = threading.Event()
        self._host = host_facts(use_imds=config.imds)
        self.beacon: Beacon | None = None  # the registry heartbeat (agent.beacon), if any
        self.trace = tracing.NO_TRACE  # the current item's spans (agent.tracing)
        self._work_root = Path(config.work_dir or tempfile.gettempdir()) / (
            "benchagent-" + safe_name(config.agent_id)
        )

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
            if msg is None:
                if once:
                    break
                # Capped exponential backoff while idle keeps an idle pool cheap.
                self.stop_after_current.wait(idle)
                idle = min(idle * 2, self.config.idle_max_s)
                continue
            idle = self.config.idle_min_s
            outcome = self.process(msg)
            log.info("message %s: %s", msg.id, outcome)
            handled += 1
            if outcome == MOUNT_DOWN:
                # Let the pool's other agents take the item back first: polling again at
                # once, this agent would spend every delivery on a mount it cannot use.
                self.stop_after_current.wait(self.config.retry_delay_s + MOUNT_DOWN_PAUSE_S)
            if once or (max_items is not None and handled >= max_items):
                break
        return handled

    def process(self, msg: Message) -> str:
        pool = self.config.pool
        try:
            item = WorkItem.model_validate_json(msg.content)
        except ValidationError as e:
            # Our API never sends such a message; keeping it would only loop forever.
            log.error("dropping malformed message %s: %s", msg.id, e)
            self._delete(msg)
            return "malformed"
        lease = Lease(
            self.queues,
            pool,
            msg,
            self.config.visibility_timeout,
            heartbeat=lambda: self.api.heartbeat(item, self.config.agent_id),
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
                self.trace.outcome = self._run_item(item, lease)
                return self.trace.outcome
        except ApiError as e:
            # The API refused a call (a 4xx): say so on the item, so the run shows the cause.
            log.error("item %s: %s", item.item_id, e)
            try:
                return self._failed(item, lease, f"the API refused this agent's call: {e}")
            except (StoreUnavailable, ApiError) as again:
                log.error("could not report the failure: %s", again)
                return "error"
        except StoreUnavailable as e:
            log.error("item %s: %s; it will be redelivered", item.item_id, e)
            return "error"
        finally:
            lease.stop()
            if self.beacon is not None:
                self.beacon.item_id = None

    def _run_item(self, item: WorkItem, lease: Lease) -> str:
        agent = self.config.agent_id
        msg = lease.message
        t0 = time.perf_counter()
        self.trace.stage("claim")
        decision = self.api.claim(item, agent, msg.dequeue_count, msg.id)
        t_claimed = time.perf_counter()
        if decision.action == "drop":
            log.info("dropping %s: %s", item.item_id, decision.reason)
            self._delete(lease.message)
            return "dropped"
        if decision.action != "run":
            log.info("handing back %s: %s", item.item_id, decision.reason)
            self._release(lease, self.config.retry_delay_s)
            return "released"
        self.trace.stage("layout")  # the checks, the files, fio started at its gate
        refused = refusal(item, self.config.agent_id, self.config.mounts, self.fio_binary)
        if refused:
            return self._failed(item, lease, refused, permanent=True)
        down = mount_down(item, self.config.agent_id, self.mounts)
        if down:
            # This VM's mount may come back, and another VM of the pool may serve the item
            # now: an attempt that failed, handed back, never a measurement (issue 13.2).
            self._failed(item, lease, down)
            return MOUNT_DOWN
        if item.engine == "diskspd":
            return run_diskspd(self, item, lease)
        lease.start(heartbeats=True)
        work_dir = self._work_root / safe_name(item.item_id)
        shutil.rmtree(work_dir, ignore_errors=True)
        # Only mounts that are not read-only get files laid out; a read-only one's data set
        # is read where it is, and nothing is written there (agent.dataset).
        data_dirs = {
            t: Path(self.config.path(t)) / ".benchsvc" / safe_name(agent)
            for t in item.targets
            if t not in item.datasets
        }
        before = {t: self.mounts.facts(t) for t in item.targets}
        meta = item.workload.metadata is not None
        if meta:
            data_dirs = metadata.tree_roots(item, self.config.path)
        try:
            read_files = read_only_files(item, self.config.path, work_dir)
            fio = FioProcess(
                item.workload,
                data_dirs=data_dirs,
                work_dir=work_dir,
                fio_binary=self.fio_binary,
                read_files=read_files,
            )
            if meta:
                metadata.prepare(item.workload, data_dirs)
                fill = None
            else:
                fill = lay_out(fio, item.workload, fill=item.fill)
        except ItemFailed as e:
            return self._failed(item, lease, str(e), permanent=e.permanent)
        if fill is not None:
            log.info("fill of %s: %s", item.item_id, "ran" if fill.ran else "marker valid")

        # Host counters each second while fio runs (what bound the run, core.analysis.ceilings)
        sampler = CounterSampler([before[t].mount_point for t in item.targets]).start()
        # fio starts up and waits at its gate before the agent says ready, so the start
        # instant only has to leave time for every agent to hear it (core.runs.protocol).
        fio.start()
        try:
            t_laid = time.perf_counter()
            if not fio.wait_parked(PARK_TIMEOUT_S):
                log.warning("fio of %s not at its gate yet; reporting ready", item.item_id)
            t_parked = time.perf_counter()
            scheduled = self._await_start(item, lease)
            log.info(
                "item %s: claim %.0f ms, checks and layout %.0f ms, fio at its gate %.0f ms, "
                "barrier %.0f ms",
                item.item_id,
                (t_claimed - t0) * 1000,
                (t_laid - t_claimed) * 1000,
                (t_parked - t_laid) * 1000,
                (time.perf_counter() - t_parked) * 1000,
            )
        except BaseException:
            fio.stop()
            sampler.stop()
            raise
        if isinstance(scheduled, str):
            fio.stop()
            sampler.stop()
            return scheduled
        sleep_until(scheduled / 1000)
        self.trace.stage("fio")
        released = fio.release()
        stop = self._wait_for(fio, lease, item)
        sampler.stop()
        if stop:
            return stop
        outcome = fio.collect()
        moved = mount_changes(item.targets, self.config.mounts, self.mounts, before)
        if moved:
            return self._failed(item, lease, moved)
        said = fio_messages(outcome.notes, outcome.stderr)
        if outcome.doc is None:
            err = " | ".join(said) or outcome.stderr.strip()[-1500:] or "no output"
            return self._failed(item, lease, f"fio exited {outcome.returncode}: {err}")
        problems = measurement_problems(outcome.doc, item.workload, mounts=len(item.targets))
        if outcome.returncode != 0:
            problems.insert(0, f"fio exited {outcome.returncode}")
        if problems:
            return self._failed(item, lease, rejection(problems, said))
        if meta:
            try:
                metadata.finish(item.workload, data_dirs)
            except ItemFailed as e:
                return self._failed(item, lease, str(e), permanent=e.permanent)
        timeline = timeline_from_logs(outcome.iops_logs, outcome.bw_logs, outcome.hist_logs)
        artifacts: dict[ArtifactName, bytes] = {
            "raw": pack_json(outcome.doc),
            "logs": fio.logs_archive(),
        }
        if timeline is not None:
            artifacts["timeline"] = pack_timeline(timeline)
        counters = sampler.artifact()
        if counters is not None:
            artifacts["counters"] = counters
        result = build_result(
            item,
            fio_json=outcome.doc,
            timeline=timeline,
            agent_id=agent,
            host=self._host,
            scheduled_ms=scheduled,
            released_ms=released,
            fill=fill,
            mounts=[self.mounts.facts(t) for t in item.targets],
        )
        summary = sampler.summary(result.started_at_ms, result.ended_at_ms, outcome.doc)
        uploaded = self._upload(item, artifacts)
        result = result.model_copy(update={"artifacts": uploaded, "counters": summary})
        return self._store(result, lease, work_dir)

    def _upload(
        self, item: WorkItem, packed: dict[ArtifactName, bytes]
    ) -> dict[ArtifactName, ArtifactRef]:
        """Large outputs go to Blob Storage through the API before the result names them."""
        self.trace.stage("result upload")  # ends with the result stored (_store)
        for name, data in packed.items():
            self.api.put_artifact(item, self.config.agent_id, name, data)
        return {name: ref(name, data) for name, data in packed.items()}

    def _await_start(self, item: WorkItem, lease: Lease) -> int | str:
        """The start barrier: report ready, wait until every client of the step is, and
        return the common start instant (Unix ms), or why this item stops."""
        self.trace.stage("barrier wait")
        agent = self.config.agent_id
        barrier = self.api.ready(item, agent)
        while barrier.status == "wait":
            stop = self._interrupted(lease, item)
            if stop:
                return stop
            time.sleep(barrier_poll_ms(item.clients) / 1000)
            barrier = self.api.barrier(item, agent)
        if barrier.status != "go":
            log.info("step of %s aborted: %s", item.item_id, barrier.reason)
            self._delete(lease.message)
            return "aborted"
        assert barrier.start_at_ms is not None, "the API sends a start instant with every go"
        return barrier.start_at_ms

    def _wait_for(self, proc: FioProcess | DiskSpdProcess, lease: Lease, item: WorkItem) -> str:
        """Wait for the engine to finish; returns why it was stopped, or '' when it ended."""
        while proc.poll() is None:
            stop = self._interrupted(lease, item, proc)
            if stop:
                return stop
            time.sleep(0.2)
        return "lease lost" if lease.lost.is_set() else ""

    def _store(self, result: Result, lease: Lease, work_dir: Path) -> str:
        """Delete the message only once the API has stored the result."""
        self.api.put_result(result.model_dump(mode="json"))
        lease.stop()
        self._delete(lease.message)
        shutil.rmtree(work_dir, ignore_errors=True)
        return "completed"

    def _interrupted(
        self, lease: Lease, item: WorkItem, fio: FioProcess | DiskSpdProcess | None = None
    ) -> str:
        """Checks, while waiting or running, whether to stop; returns why, or ''."""
        if lease.lost.is_set():
            if fio:
                fio.stop()
            return "lease lost"  # someone else may hold the item now: write nothing
        if lease.cancelled.is_set():
            if fio:
                fio.stop()
            self.api.cancelled(item, self.config.agent_id)
            self._delete(lease.message)
            return "cancelled"
        if self.stop_now.is_set():
            if fio:
                fio.stop()
            self._release(lease, 0)  # let another agent take it at once
            return "interrupted"
        return ""

    def _failed(
        self, item: WorkItem, lease: Lease, message: str, *, permanent: bool = False
    ) -> str:
        """Report a failed attempt; a permanent one (no retry can succeed) is final at once."""
        final = self.api.failure(item, self.config.agent_id, message, permanent=permanent)
        if final:
            self._delete(lease.message)
        else:
            self._release(lease, self.config.retry_delay_s)
        return "failed"

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
