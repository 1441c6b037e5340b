"""The pools' work queues and poison queues in memory, as Azure Storage queues behave (and
adapters/queue.py reports them): a received message is invisible for its visibility
timeout and then delivered again with its dequeue count one higher and a new pop receipt;
renewing or deleting it needs the newest pop receipt (``LeaseLost`` otherwise); a message
is at most 64 KiB once Base64-encoded."""

from __future__ import annotations

import base64
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.errors import BenchError, LeaseLost, PartialSend, StoreUnavailable
from core.memory.documents import Faults
from core.models import WorkItem
from core.ports import Message

MAX_MESSAGE_BYTES = 64 * 1024  # as adapters/queue.py


def work_queue_name(pool: str) -> str:
    return f"bench-{pool}"


def poison_queue_name(pool: str) -> str:
    return f"{work_queue_name(pool)}-poison"


def _check_size(item: WorkItem, body: str) -> None:
    if len(body.encode()) * 4 // 3 + 4 > MAX_MESSAGE_BYTES:
        raise BenchError(f"work item {item.item_id} exceeds the 64 KiB queue message limit")


@dataclass
class _Stored:
    id: str
    content: str
    visible_at: float
    dequeue_count: int = 0
    pop_receipt: str = ""


class MemoryQueues:
    """Both sides of the queues (core.ports.Queue and AgentQueue) on one clock."""

    def __init__(self, clock: Callable[[], float], faults: Faults | None = None) -> None:
        self.clock = clock
        self.faults = faults
        self.queues: dict[str, list[_Stored]] = {}
        self.deferred: list[Callable[[], object]] = []
        self._ids = itertools.count(1)

    def _effect(self, op: str, name: str) -> str:
        return "ok" if self.faults is None else self.faults(op, "queue", name)

    def _queue(self, name: str) -> list[_Stored]:
        if name not in self.queues:
            raise StoreUnavailable(f"queue {name} does not exist", "the queue service")
        return self.queues[name]

    def ensure_pool(self, pool: str) -> None:
        for name in (work_queue_name(pool), poison_queue_name(pool)):
            self.queues.setdefault(name, [])

    def apply_deferred(self) -> int:
        held, self.deferred = self.deferred, []
        for write in held:
            write()
        return len(held)

    # ---- the service's side -------------------------------------------------------------

    def send(self, item: WorkItem) -> None:
        body = item.model_dump_json()
        _check_size(item, body)
        self._send(work_queue_name(item.pool), body)

    def send_all(self, items: Sequence[WorkItem]) -> None:
        """One after another here (the simulation stays deterministic), with the adapter's
        contract: an item over the limit is refused before any is sent; every item is
        tried, then PartialSend names those that failed."""
        for item in items:
            _check_size(item, item.model_dump_json())
        failed: list[tuple[WorkItem, StoreUnavailable]] = []
        for item in items:
            try:
                self.send(item)
            except StoreUnavailable as e:
                failed.append((item, e))
        if failed:
            unsent = [item.item_id for item, _ in failed]
            raise PartialSend(str(failed[0][1]), unsent) from failed[0][1]

    def send_poison(self, pool: str, body: str) -> None:
        self._send(poison_queue_name(pool), body)

    def send_clean(self, pool: str, body: str) -> None:
        self._send(work_queue_name(pool), body)

    def _send(self, name: str, body: str) -> None:
        queue = self._queue(name)
        effect = self._effect("send", name)

        def apply() -> None:
            queue.append(_Stored(id=f"m{next(self._ids)}", content=body, visible_at=self.clock()))

        if effect == "fail":
            raise StoreUnavailable(f"cannot send to queue {name} (simulated)", "the queue service")
        if effect == "defer":
            self.deferred.append(apply)
            raise StoreUnavailable(f"cannot send to queue {name} (simulated)", "the queue service")
        apply()
        if effect == "lost":
            raise StoreUnavailable(f"cannot send to queue {name} (simulated)", "the queue service")

    # ---- the agents' side ---------------------------------------------------------------

    def receive(self, pool: str, visibility_timeout: int) -> Message | None:
        name = work_queue_name(pool)
        queue = self._queue(name)
        if self._effect("receive", name) != "ok":
            raise StoreUnavailable(f"cannot receive from {name} (simulated)", "the queue service")
        now = self.clock()
        for m in queue:
            if m.visible_at <= now:
                m.dequeue_count += 1
                m.pop_receipt = f"{m.id}:{m.dequeue_count}:{next(self._ids)}"
                m.visible_at = now + visibility_timeout
                return Message(m.id, m.pop_receipt, m.dequeue_count, m.content)
        return None

    def _held(self, pool: str, message: Message, op: str) -> _Stored:
        name = work_queue_name(pool)
        queue = self._queue(name)
        if self._effect(op, name) != "ok":
            raise StoreUnavailable(
                f"cannot {op} message {message.id} (simulated)", "the queue service"
            )
        for m in queue:
            if m.id == message.id and m.pop_receipt == message.pop_receipt:
                return m
        raise LeaseLost(f"lost the lease on message {message.id}: MessageNotFound")

    def renew(self, pool: str, message: Message, visibility_timeout: int) -> Message:
        m = self._held(pool, message, "renew")
        m.pop_receipt = f"{m.id}:{m.dequeue_count}:{next(self._ids)}"
        m.visible_at = self.clock() + visibility_timeout
        return Message(m.id, m.pop_receipt, message.dequeue_count, message.content)

    def delete(self, pool: str, message: Message) -> None:
        m = self._held(pool, message, "delete")
        self.queues[work_queue_name(pool)].remove(m)

    # ---- looking ------------------------------------------------------------------------

    def peek_raw(self, name: str, max_messages: int = 32) -> list[str]:
        """Bodies as stored by Azure (Base64), visible ones only, as a peek shows."""
        now = self.clock()
        visible = [m for m in self._queue(name) if m.visible_at <= now]
        return [base64.b64encode(m.content.encode()).decode() for m in visible[:max_messages]]

    def approximate_count(self, name: str) -> int:
        return len(self._queue(name))
