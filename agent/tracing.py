"""The agent's spans, in each run's trace. An item's span continues the trace its queue
message carries (``traceparent``, adapters/queue.py); under it one span per stage, in
order: claim, layout, barrier wait, fio (or diskspd), result upload. Every span carries the
run, step, item and agent ids, and the API calls made during a stage carry that stage's
trace context (agent/api_client.py), so the API's spans of those calls nest under it.

Where spans go: adapters/telemetry.py (Azure Monitor, an OTLP collector, files, or nowhere).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import Token

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind

from adapters import telemetry
from adapters.queue import Message, work_queue_name
from core.models import WorkItem
from core.telemetry import Attribute

SERVICE = "benchsvc-agent"


def setup(
    agent_id: str, connection_string: str | None = None, client_id: str | None = None
) -> str | None:
    """This agent's exporters (none configured: every span is a no-op). With an Application
    Insights connection string (the agent's configuration, from the Bicep) the distro sends
    with the agent's managed identity, as the Function App does."""
    if connection_string:
        os.environ.setdefault(telemetry.APPINSIGHTS, connection_string)
        if client_id:
            auth = f"Authorization=AAD;ClientId={client_id}"
            os.environ.setdefault("APPLICATIONINSIGHTS_AUTHENTICATION_STRING", auth)
    return telemetry.setup(SERVICE, agent_id)


class ItemTrace:
    """An item's stages: each ``stage`` ends the one before (they follow each other)."""

    def __init__(self, ids: dict[str, Attribute], *, live: bool = True) -> None:
        self.ids = ids
        self.live = live
        self.outcome = ""  # how the item ended for this agent (the worker's outcome)
        self._open: tuple[Span, Token[Context]] | None = None

    def stage(self, name: str) -> None:
        """End the current stage, if any, and start ``name`` as the current span."""
        self.done()
        if not self.live:
            return
        span = telemetry.tracer().start_span(name, attributes=telemetry.prefixed(self.ids))
        self._open = (span, otel_context.attach(trace.set_span_in_context(span)))

    def done(self) -> None:
        if self._open is not None:
            span, token = self._open
            self._open = None
            otel_context.detach(token)
            span.end()


@contextlib.contextmanager
def item(work: WorkItem, agent_id: str, message: Message) -> Iterator[ItemTrace]:
    """The span of one delivery of ``work`` to this agent, under the span that sent it."""
    ids: dict[str, Attribute] = {
        "run_id": work.run_id,
        "step": work.step,
        "item_id": work.item_id,
        "client": work.client,
        "agent_id": agent_id,
        "pool": work.pool,
    }
    queue = work_queue_name(work.pool)
    with telemetry.tracer().start_as_current_span(
        f"process {queue}",
        context=telemetry.context_of(work.traceparent),
        kind=SpanKind.CONSUMER,
        attributes={
            "messaging.system": "azure_storage_queue",
            "messaging.destination.name": queue,
            "messaging.message.id": message.id,
            "messaging.message.delivery_count": message.dequeue_count,
            **telemetry.prefixed(ids),
        },
    ) as span:
        stages = ItemTrace(ids)
        try:
            yield stages
        finally:
            stages.done()
            span.set_attribute("bench.outcome", stages.outcome)


NO_TRACE = ItemTrace({}, live=False)  # outside any item: stages record nothing
