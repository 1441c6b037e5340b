"""Azure Storage Queue adapter: work queues per agent pool and their poison queues.

Messages are Base64 on both ends (TextBase64EncodePolicy/DecodePolicy) because that is what
an Azure Functions queue trigger expects. SDK errors become the project's own errors.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from azure.core.exceptions import AzureError, HttpResponseError, ResourceExistsError
from azure.storage.queue import (
    QueueClient,
    QueueServiceClient,
    TextBase64DecodePolicy,
    TextBase64EncodePolicy,
)

from adapters import counting
from adapters.config import Settings
from adapters.storage import READ_TIMEOUT_S, bounded_client_options, storage_credential
from adapters.telemetry import producer
from adapters.transport import POOL_SIZE
from core import telemetry
from core.errors import BenchError, LeaseLost, PartialSend, StoreUnavailable
from core.models import WorkItem
from core.ports import Message

__all__ = ["LeaseLost", "Message", "WorkQueues", "poison_queue_name", "work_queue_name"]

log = logging.getLogger(__name__)
MAX_MESSAGE_BYTES = 64 * 1024
# A step's messages go out this many at a time (send_all): the sends were 60 % of intake
# one after another (issue 29.3). 32, not 8: a send waits for the queue service to make it
# durable, and concurrent sends share that wait (Azurite's group commit, scripts/azurite.js:
# 1,000 sends 8 at a time took 8-10 s and 6.5 ms of Azurite's CPU each, 32 at a time 5.5 s
# and 2.5 ms). 128, not 32: while 1,000 clients claim and report ready, a send waits 0.7-1 s
# for the CPU the API's and the queue's other calls take, and 32 at a time went out at
# 36-45 a second (issue 29.2: intake 24-30 s at 32, 18.5 s at 128; 2026-11-27 17:50-18:05
# UTC). Well within a queue's 2,000 messages a second; the client keeps as many connections.
SEND_CONCURRENCY = 128


def work_queue_name(pool: str) -> str:
    return f"bench-{pool}"


def poison_queue_name(pool: str) -> str:
    # The "-poison" suffix is the Functions queue trigger's convention.
    return f"{work_queue_name(pool)}-poison"


def _check_size(item: WorkItem, body: str) -> None:
    if len(body.encode()) * 4 // 3 + 4 > MAX_MESSAGE_BYTES:
        raise BenchError(f"work item {item.item_id} exceeds the 64 KiB queue message limit")


class WorkQueues:
    def __init__(self, service: QueueServiceClient) -> None:
        self._service = service
        self._clients: dict[str, QueueClient] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> WorkQueues:
        """The service's side: no second attempt while a caller waits (the outbox retries)."""
        return cls.connect(
            settings.queue_uri,
            local_emulators=settings.local_emulators,
            client_id=settings.managed_identity_client_id,
            retries=0,
        )

    @classmethod
    def connect(
        cls,
        queue_uri: str,
        *,
        local_emulators: bool,
        client_id: str | None = None,
        retries: int = 1,
        read_timeout_s: int = READ_TIMEOUT_S,
    ) -> WorkQueues:
        credential = storage_credential(
            queue_uri, local_emulators=local_emulators, client_id=client_id
        )
        return cls(
            QueueServiceClient(
                queue_uri,
                credential=credential,
                **bounded_client_options(
                    retries, read_timeout_s, pool_size=max(POOL_SIZE, SEND_CONCURRENCY)
                ),
                **counting.hooks("queue"),
            )
        )

    def client(self, name: str) -> QueueClient:
        if name not in self._clients:
            self._clients[name] = self._service.get_queue_client(
                name,
                message_encode_policy=TextBase64EncodePolicy(),
                message_decode_policy=TextBase64DecodePolicy(),
            )
        return self._clients[name]

    def ensure_pool(self, pool: str) -> None:
        """Create the pool's queues (locally; in Azure the Bicep creates them)."""
        for name in (work_queue_name(pool), poison_queue_name(pool)):
            try:
                self.client(name).create_queue()
            except ResourceExistsError:
                pass
            except AzureError as e:
                raise StoreUnavailable(
                    f"cannot create queue {name}: {e}", "the queue service"
                ) from e

    def send(self, item: WorkItem) -> None:
        """The message carries its send span's W3C trace context (``traceparent``): the
        agent that takes it continues the run's trace (adapters/telemetry.py)."""
        name = work_queue_name(item.pool)
        with producer(
            name, pool=item.pool, run_id=item.run_id, step=item.step, item_id=item.item_id
        ) as traceparent:
            body = item.model_copy(update={"traceparent": traceparent}).model_dump_json()
            _check_size(item, body)
            self._send(name, body)

    def send_all(self, items: Sequence[WorkItem]) -> None:
        """Send every item, SEND_CONCURRENCY at a time; once all were tried, PartialSend
        names the items whose send failed (the caller sends only those again; a send that
        timed out may still have gone, and a second copy of an item is dropped at claim).
        An item over the message limit is refused before anything is sent."""
        for item in items:
            _check_size(item, item.model_dump_json())
        if len(items) <= 1:
            for item in items:
                self.send(item)
            return
        with ThreadPoolExecutor(min(SEND_CONCURRENCY, len(items)), "queue-send") as pool:
            # Each send runs in a copy of the caller's context: its span's parent is the
            # caller's "enqueue step" span.
            futures = [pool.submit(contextvars.copy_context().run, self.send, i) for i in items]
        failed: list[tuple[WorkItem, BaseException]] = []
        for item, future in zip(items, futures, strict=True):
            error = future.exception()
            if error is not None and not isinstance(error, StoreUnavailable):
                raise error  # not the queue's: nothing to send again
            if error is not None:
                failed.append((item, error))
        if failed:
            unsent = [i.item_id for i, _ in failed]
            raise PartialSend(str(failed[0][1]), unsent) from failed[0][1]

    def send_poison(self, pool: str, body: str) -> None:
        self._send(poison_queue_name(pool), body)
        telemetry.count("bench.poison.messages", pool=pool)

    def send_clean(self, pool: str, body: str) -> None:
        """An order for the pool's agents other than a work item (core.runs.clean)."""
        self._send(work_queue_name(pool), body)

    def _send(self, name: str, body: str) -> None:
        try:
            self.client(name).send_message(body)
        except AzureError as e:
            raise StoreUnavailable(f"cannot send to queue {name}: {e}", "the queue service") from e

    def receive(self, pool: str, visibility_timeout: int) -> Message | None:
        try:
            msg = self.client(work_queue_name(pool)).receive_message(
                visibility_timeout=visibility_timeout
            )
        except AzureError as e:
            raise StoreUnavailable(
                f"cannot receive from {work_queue_name(pool)}: {e}", "the queue service"
            ) from e
        if msg is None:
            return None
        return Message(msg.id, msg.pop_receipt or "", int(msg.dequeue_count or 0), msg.content)

    def renew(self, pool: str, message: Message, visibility_timeout: int) -> Message:
        """Push the message's invisibility out again; returns it with the new pop receipt."""
        try:
            updated = self.client(work_queue_name(pool)).update_message(
                message.id, pop_receipt=message.pop_receipt, visibility_timeout=visibility_timeout
            )
        except HttpResponseError as e:
            if e.status_code in (400, 404):  # receipt mismatch or message gone
                raise LeaseLost(f"lost the lease on message {message.id}: {e.reason}") from e
            raise StoreUnavailable(
                f"cannot renew message {message.id}: {e}", "the queue service"
            ) from e
        except AzureError as e:
            raise StoreUnavailable(
                f"cannot renew message {message.id}: {e}", "the queue service"
            ) from e
        return Message(
            message.id, updated.pop_receipt or "", message.dequeue_count, message.content
        )

    def delete(self, pool: str, message: Message) -> None:
        try:
            self.client(work_queue_name(pool)).delete_message(message.id, message.pop_receipt)
        except HttpResponseError as e:
            if e.status_code in (400, 404):
                raise LeaseLost(f"cannot delete message {message.id}: {e.reason}") from e
            raise StoreUnavailable(
                f"cannot delete message {message.id}: {e}", "the queue service"
            ) from e
        except AzureError as e:
            raise StoreUnavailable(
                f"cannot delete message {message.id}: {e}", "the queue service"
            ) from e

    def peek_raw(self, name: str, max_messages: int = 32) -> list[str]:
        """Message bodies exactly as stored (still Base64), for checks and tests."""
        raw = self._service.get_queue_client(name)
        return [str(m.content) for m in raw.peek_messages(max_messages=max_messages)]

    def approximate_count(self, name: str) -> int:
        try:
            props = self.client(name).get_queue_properties()
        except AzureError as e:
            raise StoreUnavailable(f"cannot read queue {name}: {e}", "the queue service") from e
        return int(props.approximate_message_count or 0)

    def oldest(self, name: str) -> float | None:
        """When the oldest visible message of ``name`` was sent (Unix seconds), or None."""
        try:
            peeked = self._service.get_queue_client(name).peek_messages(max_messages=1)
        except AzureError as e:
            raise StoreUnavailable(f"cannot peek queue {name}: {e}", "the queue service") from e
        sent = peeked[0].inserted_on if peeked else None
        return sent.timestamp() if sent is not None else None
