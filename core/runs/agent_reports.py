"""The agents' reports while an item runs and when it ends: heartbeat, failure, cancelled,
artifacts and the result (pure logic over the repositories).

As for claims and the barrier (core.runs.protocol): a report is accepted only from the
agent holding the item, in a state where it makes sense, decided inside the item's
compare-and-swap; it changes only its item (and step); an item that ends advances its run.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from core.artifacts import sha256_hex
from core.errors import FieldError, NotFound, StoreUnavailable, TooLarge, ValidationFailed
from core.models import ARTIFACT_NAMES, Result
from core.models.holder import AgentRef, holds, refuse
from core.models.live import LiveSample
from core.models.result import InlineArtifactName
from core.models.state import ItemState
from core.models.stored import Item, ItemError, Step
from core.receipts import ReceiptKey, Upload, sign, valid
from core.runs import live
from core.runs.barrier import leave
from core.runs.carried import carried_artifacts, carried_timeline
from core.runs.lifecycle import Lifecycle
from core.runs.shared_count import SharedCount
from core.runs.timer import advance_or_defer
from core.timestamps import iso_ms
from core.validation import parse

log = logging.getLogger(__name__)

# An agent heartbeats its item every second (for cancellation and the start of its step);
# the item records that sign of life at most this often, so heartbeats write little.
HEARTBEAT_RECORD_S = 30


class AgentReports:
    def __init__(self, lifecycle: Lifecycle) -> None:
        self.life = lifecycle
        self.store = lifecycle.store
        self.receipt_key = ReceiptKey(lifecycle.artifacts)
        self.open_counts: SharedCount[tuple[str, int], int] = SharedCount()

    def heartbeat(
        self,
        run_id: str,
        item_id: str,
        agent: AgentRef,
        samples: list[LiveSample] | None = None,
        *,
        waiting: bool = False,
    ) -> dict[str, bool]:
        """Tells the agent to stop when the run was cancelled; marks a ready item running
        once its start instant has passed. An item its agent no longer holds (taken over,
        failed, gone) is refused: the agent stops and writes nothing. The live ``samples``
        it relays (fio's status since the last beat) are kept for the live view.

        One read, of the item, and no write, for most beats: the cancel marks held items
        (``Item.cancel``); the step is read only while the item is ready (for its start
        instant), and the run only with the sign of life recorded every
        HEARTBEAT_RECORD_S (should a cancel have died before it marked this item).
        ``waiting``: the agent has not heard its step's start yet, so its item has not
        started: the step is not read (issue 29.3: a beat a second from each of 32 agents
        waiting at the barrier, beside the step's claims and ready reports)."""
        doc = self.store.items.get_item(run_id, item_id)
        if not holds(doc, agent) or not doc.held:
            raise refuse(doc, agent, "heartbeat")
        now = self.life.now_ms()
        started = False
        if doc.state == ItemState.READY and not waiting:  # a ready item moves on (to running)
            start = doc.start_at_ms
            if start is None:
                start = self.store.items.get_step(run_id, doc.step).start_at_ms
            started = start is not None and start <= now
        cancel = doc.cancel_requested
        if not cancel and _stale(doc.heartbeat_at, now):
            cancel = self.store.runs.get(run_id).cancel_requested
        held: list[bool] = []

        def beat(d: Item) -> bool | None:
            held[:] = [holds(d, agent) and d.held]
            if not held[0]:
                return False
            promote = started and d.state == ItemState.READY
            if not promote and not _stale(d.heartbeat_at, now):
                return False  # nothing to record: no write (they come every second)
            d.heartbeat_at = iso_ms(now)
            if promote:
                d.move(ItemState.RUNNING, started_at=iso_ms(now))
            return None

        # Nothing to record on the item as read above stands: it was read milliseconds ago,
        # and the next heartbeat comes in a second; a fresh read to confirm it would double
        # every heartbeat's reads (bench.cost: 15,000 reads more in a run of 1,000 clients).
        doc = self.life.update_item(run_id, item_id, beat, read=doc, trusted=True)
        if not held[0]:
            raise refuse(doc, agent, "heartbeat")
        if samples and doc.state in (ItemState.READY, ItemState.RUNNING):
            self._keep_live(doc, agent, samples)
        return {"cancel": cancel or doc.cancel_requested}

    def _keep_live(self, doc: Item, agent: AgentRef, samples: list[LiveSample]) -> None:
        """Best effort: a live view that misses a second must not fail the heartbeat that
        carries cancellation and the lease's sign of life."""
        try:
            live.record(
                self.store.live,
                run_id=doc.run_id,
                item_id=doc.id,
                step=doc.step,
                client=doc.client,
                agent_id=agent.id,
                samples=samples,
            )
        except (StoreUnavailable, TooLarge) as e:
            log.warning("live samples of %s not kept: %s", doc.id, e)

    def report_failure(
        self,
        run_id: str,
        item_id: str,
        agent: AgentRef,
        message: str,
        *,
        report_id: str | None = None,
        permanent: bool = False,
    ) -> bool:
        """A failed attempt. Returns True when it is final (the agent deletes the message):
        a ``permanent`` failure (the agent says no retry can succeed), or a client of a
        multi-client step that already started (it cannot be redone on its own).

        ``report_id`` keys the report: a retry of one already recorded returns the same
        answer and records nothing twice."""
        doc = self.store.items.get_item(run_id, item_id)
        step = self.store.items.get_step(run_id, doc.step)
        final = permanent or (step.clients > 1 and step.start_at_ms is not None)
        outcome: list[bool | None] = []  # [final], [None] when refused
        replay: list[bool] = []

        def fail(d: Item) -> bool | None:
            seen = next(
                (
                    e
                    for e in d.errors
                    if report_id and e.report_id == report_id and e.agent_id == agent.id
                ),
                None,
            )
            replay[:] = [seen is not None]
            if seen is not None:
                outcome[:] = [bool(seen.final)]
                return False
            if not holds(d, agent) or not d.held:
                outcome[:] = [None]
                return False
            outcome[:] = [final]
            at = iso_ms(self.life.now_ms())
            error = ItemError(at=at, agent_id=agent.id, message=message[:2000])
            if report_id:
                error.report_id, error.final = report_id, final
            d.errors = [*d.errors[-9:], error]
            if final:
                d.move(ItemState.FAILED, reason=message[:2000])
            else:
                d.move(ItemState.QUEUED, agent_id=None, principal=None, start_at_ms=None)
            return None

        doc = self.life.update_item(run_id, item_id, fail)
        if outcome[0] is None:
            raise refuse(doc, agent, "failure report")
        if replay[0]:
            return bool(outcome[0])

        def reopen(s: Step) -> bool | None:
            if s.start_at_ms is None or s.clients != 1:
                return False
            s.reopen()  # a lone client's retry: a fresh barrier
            return None

        if final:
            self.life.advance(run_id)
            return final
        step = self.store.items.get_step(run_id, doc.step)
        if step.start_at_ms is None:
            leave(self.life, step, doc.client)  # it reports ready again when claimed again
        else:
            self.life.update_step(run_id, doc.step, reopen, read=step)
        return final

    def report_cancelled(self, run_id: str, item_id: str, agent: AgentRef) -> None:
        """The agent stopped its item because the run was cancelled."""
        run = self.store.runs.get(run_id)
        accepted: list[bool] = []

        def stop(d: Item) -> bool | None:
            if holds(d, agent) and d.state == ItemState.CANCELLED:
                accepted[:] = [True]  # a retry of a report already recorded
                return False
            accepted[:] = [holds(d, agent) and d.held and run.cancel_requested]
            if not accepted[0]:
                return False
            d.move(ItemState.CANCELLED, reason=f"stopped by {agent.id}")
            return None

        doc = self.life.update_item(run_id, item_id, stop)
        if not accepted[0]:
            raise refuse(doc, agent, "cancelled report")
        self.life.advance(run_id)

    # ---- results ------------------------------------------------------------------------

    def put_artifact(
        self, run_id: str, item_id: str, name: str, data: bytes, agent: AgentRef
    ) -> Upload:
        """Keep one of an item's large outputs (gzip bytes) in Blob Storage, before its
        result names it, from the agent holding the item after its start (an upload again
        writes the same blob). Returns the stored size and its receipt (core.receipts:
        empty when the key could not be read, and the result's check asks Blob Storage)."""
        if name not in ARTIFACT_NAMES:
            raise ValidationFailed(
                [FieldError("name", f"must be one of {', '.join(ARTIFACT_NAMES)}")]
            )
        doc = self.store.items.get_item(run_id, item_id)  # NotFound -> 404
        if not holds(doc, agent) or doc.state not in (ItemState.READY, ItemState.RUNNING):
            raise refuse(doc, agent, "artifact")
        self.life.artifacts.put(run_id, item_id, name, data)
        try:
            key = self.receipt_key.get()
        except StoreUnavailable as e:
            log.warning("no receipt for %s of %s: %s", name, item_id, e)
            return Upload(len(data), "")
        return Upload(len(data), sign(key, run_id, item_id, name, len(data), sha256_hex(data)))

    def _keep(self, result: Result, files: dict[InlineArtifactName, bytes]) -> None:
        """The artifacts a result carries, put in Blob Storage as their uploads would be."""
        for name, data in files.items():
            self.life.artifacts.put(result.run_id, result.item_id, name, data)

    def _receipted(self, result: Result, receipts: dict[str, str]) -> set[str]:
        """The result's artifacts whose receipts are the API's own for what they name."""
        if not receipts:
            return set()
        try:
            key = self.receipt_key.get()
        except StoreUnavailable:
            return set()
        return {
            name
            for name, a in result.artifacts.items()
            if valid(
                key, receipts.get(name), result.run_id, result.item_id, name, a.bytes, a.sha256
            )
        }

    def store_result(
        self, body: Any, agent: AgentRef, receipts: dict[str, str] | None = None
    ) -> bool:
        """Store one client's result once, from the agent holding the item after its
        start. Returns False when it was already stored (a retry).

        Every artifact the result names must already be in Blob Storage at the size it
        says: a result never points at a file that is not there. Blob Storage is asked
        about each one unless ``receipts`` holds the receipt its put answered for what the
        result names (core.receipts: 3 HEADs fewer per result)."""
        result = parse(Result, body)
        # Its own bytes first: nothing read for a malformed result.
        carried, carried_files = carried_timeline(result), carried_artifacts(result)
        errors = []
        if result.id != result.item_id:
            errors.append(FieldError("id", "must equal item_id"))
        if result.agent_id != agent.id:
            errors.append(FieldError("agent_id", f"must be the reporting agent, {agent.id}"))
        doc = self.store.items.get_item(result.run_id, result.item_id)  # NotFound -> 404
        for name in ("step", "client"):
            if getattr(result, name) != getattr(doc, name):
                errors.append(FieldError(name, f"must be the item's {name}, {getattr(doc, name)}"))
        if errors:
            raise ValidationFailed(errors)
        # Checked on a fresh read before the result is written (a forged result is never
        # stored); the item's state then changes by compare-and-swap. The result is written
        # first so that a completed item always has its result when the run is finalized.
        done_states = (ItemState.READY, ItemState.RUNNING, ItemState.COMPLETED)
        if not holds(doc, agent) or doc.state not in done_states:
            raise refuse(doc, agent, "result")
        receipted = self._receipted(result, receipts or {}) | carried | set(carried_files)
        for name, artifact in result.artifacts.items():
            if name in receipted:
                continue
            try:
                size = self.life.artifacts.size(result.run_id, result.item_id, name)
            except NotFound:
                size = -1
            if size != artifact.bytes:
                raise ValidationFailed(
                    [
                        FieldError(
                            f"artifacts.{name}",
                            f"not uploaded (or not at {artifact.bytes} bytes): "
                            f"PUT /api/agent/artifacts/{result.item_id}/{name} first",
                        )
                    ]
                )
        # Last before the result: a refused result writes no blob. A retry once completed
        # rewrites none (its result names what was kept).
        if doc.state != ItemState.COMPLETED:
            self._keep(result, carried_files)
        created = self.store.results.create(result.as_stored())
        flipped: list[bool] = []

        def done(d: Item) -> bool | None:
            flipped[:] = [holds(d, agent) and d.state in (ItemState.READY, ItemState.RUNNING)]
            if not flipped[0]:
                return False
            d.move(ItemState.COMPLETED)
            return None

        # From the item read above: a copy gone stale meanwhile (a heartbeat's write) fails
        # its swap and is read again (one read fewer per result: issue 29's final burst).
        self.life.update_item(result.run_id, result.item_id, done, read=doc)
        if flipped[0]:
            self._ended(result.run_id, result.step)
        return created

    def _ended(self, run_id: str, step: int) -> None:
        """The run moves on when its step's last item ends: a count of the step's items
        still open, not a read of the whole run by every client (issue 29: calls per
        client grew with the clients), shared by the results that end meanwhile in this
        process (core.runs.shared_count); the one that ran it advances. Missed by a race,
        the timer advances it when due."""
        still_open, ran = self.open_counts.ask(
            (run_id, step), lambda: self.store.items.open_items(run_id, step)
        )
        if ran and still_open == 0:
            advance_or_defer(self.life, run_id)


def _stale(stamp: str | None, now_ms: int) -> bool:
    """Whether an item's recorded sign of life is older than HEARTBEAT_RECORD_S."""
    if stamp is None:
        return True
    at = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000
    return now_ms - at >= HEARTBEAT_RECORD_S * 1000
