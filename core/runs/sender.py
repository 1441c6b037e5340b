"""Sending one step's items as the holder of its send lease (core.runs.sending's rules):
its item documents created, then one message each, in chunks, the lease renewed between
them with the clients not sent yet (issue 29: a 1,000-item send through a slow queue
outlasted its lease and the timer sent the whole step again beside it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from core import telemetry
from core.errors import PartialSend
from core.models import WorkItem
from core.models.stored import Item, Run, Step
from core.runs import sending
from core.runs.sending import SendInProgress

StepChange = Callable[[Step], bool | None]


class StepSender:
    """The sender of one step, from the lease mark it wrote (``held_ms``). ``left``: the
    clients it has not sent yet once every item exists (None before), what it records at
    each renewal and gives back when it fails."""

    def __init__(
        self,
        step: int,
        held_ms: int,
        update: Callable[[StepChange], Step],
        now_ms: Callable[[], int],
    ) -> None:
        self.step = step
        self.held_ms = held_ms
        self.update = update  # a compare-and-swap on the step document
        self.now_ms = now_ms
        self.left: list[int] | None = None

    def renew(self) -> None:
        """Renew the lease (with ``left``) once RENEW_EVERY_MS has passed since the last
        renewal; SendInProgress when another sender took it over meanwhile (this one stops:
        the other sends what was recorded as not sent)."""
        now = self.now_ms()
        if now - self.held_ms < sending.RENEW_EVERY_MS:
            return
        kept: list[bool] = []
        step = self.update(sending.renewing(self.held_ms, now, self.left, kept))
        if not kept[0]:
            raise SendInProgress(self.step, sending.lapses_ms(step))
        self.held_ms = now

    def create(self, create_items: Callable[[list[Item]], None], items: list[Item]) -> None:
        for i in range(0, len(items), sending.CREATE_CHUNK):
            create_items(items[i : i + sending.CREATE_CHUNK])
            self.renew()

    def send(self, send_all: Callable[[Sequence[WorkItem]], None], work: list[WorkItem]) -> None:
        """Send every item of ``work`` (their documents exist), a chunk at a time, each
        tried once; then PartialSend names every item whose send failed."""
        failed: list[str] = []
        first: PartialSend | None = None
        done, size = 0, sending.FIRST_CHUNK
        while done < len(work):
            chunk = work[done : done + size]
            self.left = self._clients(failed, work) + [w.client for w in work[done:]]
            began = self.now_ms()
            try:
                send_all(chunk)
            except PartialSend as e:
                failed += e.unsent
                first = first or e
            done += len(chunk)
            self.left = self._clients(failed, work) + [w.client for w in work[done:]]
            size = sending.next_chunk(len(chunk), self.now_ms() - began)
            self.renew()
        if failed:
            failed, first = self._again(send_all, work, failed)
        if first is not None:
            raise PartialSend(str(first), failed) from first

    def _again(
        self,
        send_all: Callable[[Sequence[WorkItem]], None],
        work: list[WorkItem],
        failed: list[str],
    ) -> tuple[list[str], PartialSend | None]:
        """The sends that failed, once more at once (SEND_RETRIES times): a send that timed
        out in a burst mostly goes the second time, and a step left part-sent waited for
        the timer's next tick on an instance holding its lease (issue 29.2: 10 s of a
        1,000-client intake, 2026-11-27 21:22 UTC). Returns what still failed."""
        first: PartialSend | None = None
        for _ in range(sending.SEND_RETRIES):
            again = set(failed)
            failed, first = [], None
            try:
                send_all([w for w in work if w.item_id in again])
            except PartialSend as e:
                failed, first = list(e.unsent), e
            self.left = self._clients(failed, work)
            self.renew()
            if not failed:
                break
        return failed, first

    @staticmethod
    def _clients(item_ids: list[str], work: list[WorkItem]) -> list[int]:
        if not item_ids:
            return []
        wanted = set(item_ids)
        return [w.client for w in work if w.item_id in wanted]

    def run(
        self,
        run: Run,
        work: list[WorkItem],
        unsent: list[int] | None,
        create_items: Callable[[list[Item]], None],
        send_all: Callable[[Sequence[WorkItem]], None],
    ) -> None:
        """Create the step's items unless an earlier sender did (``unsent`` not None: it
        recorded what it had not sent), then send those not sent."""
        if unsent is None:
            made = [
                Item(id=w.item_id, run_id=run.id, step=w.step, client=w.client, work_item=w)
                for w in work
            ]
            self.create(create_items, made)
        # Each message carries this span's trace context to its agent (adapters/queue.py).
        with telemetry.span("enqueue step", run.traceparent, run_id=run.id, step=self.step):
            self.send(send_all, sending.still_to_send(unsent, work))
        out = sending.STEP_OUT.get()
        if out is not None:
            out()
