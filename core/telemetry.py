"""The core's one seam to telemetry: it names the spans of a run's trace and counts events;
what they become (OpenTelemetry spans and metrics, exported to Azure Monitor, an OTLP
collector or a file) is the adapters' business (adapters/telemetry.py installs a sink).
Nothing here imports OpenTelemetry; with no sink installed every call does nothing.

A run's trace is the trace of its intake: intake records its span's W3C ``traceparent`` on
the run, and every later span of the run names it as ``parent``. Such a span joins the
run's trace: under the current span when that one is already in the run's trace (an
agent's call into the API carries it), else directly under the intake span (the timer).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Protocol

Attribute = str | int


class Span(Protocol):
    @property
    def traceparent(self) -> str | None: ...  # W3C trace context of this span

    def set(self, key: str, value: Attribute) -> None: ...


class Sink(Protocol):
    def span(
        self, name: str, parent: str | None, attributes: Mapping[str, Attribute]
    ) -> AbstractContextManager[Span]: ...

    def count(self, name: str, attributes: Mapping[str, str]) -> None: ...


class _NoSpan:
    traceparent: str | None = None

    def set(self, key: str, value: Attribute) -> None:
        pass


class _NoSink:
    @contextlib.contextmanager
    def span(
        self, name: str, parent: str | None, attributes: Mapping[str, Attribute]
    ) -> Iterator[Span]:
        yield _NoSpan()

    def count(self, name: str, attributes: Mapping[str, str]) -> None:
        pass


_sink: Sink = _NoSink()


def install(sink: Sink | None) -> None:
    """The process's sink (None: back to doing nothing)."""
    global _sink
    _sink = sink if sink is not None else _NoSink()


def span(
    name: str, parent: str | None = None, **attributes: Attribute
) -> AbstractContextManager[Span]:
    """A span named ``name`` in the trace of ``parent`` (a run's ``traceparent``), carrying
    ``attributes`` (run_id, step, item_id, agent_id, pool: the sink prefixes them)."""
    return _sink.span(name, parent, attributes)


def count(name: str, **attributes: str) -> None:
    """One more of the counter ``name``."""
    _sink.count(name, attributes)
