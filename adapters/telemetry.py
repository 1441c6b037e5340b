"""OpenTelemetry for the API and the agents: where their spans and metrics go, W3C trace
context in and out, and the sink the pure core names its spans through (core.telemetry).

Where telemetry goes is read from the environment, first found:

- ``APPLICATIONINSIGHTS_CONNECTION_STRING``: Azure Monitor, through the Azure Monitor
  OpenTelemetry distro (Entra ID ingestion: ``APPLICATIONINSIGHTS_AUTHENTICATION_STRING``,
  no key);
- ``OTEL_EXPORTER_OTLP_ENDPOINT``: an OTLP/HTTP collector (the OpenTelemetry Collector,
  Jaeger, ...), the standard OTEL_* variables apply;
- ``BENCH_TELEMETRY_DIR``: files of one JSON object a line, per process:
  ``<service>-<pid>.spans.jsonl`` and ``.metrics.jsonl`` (the local stack's);
- none of them: nothing is recorded, and every span is OpenTelemetry's no-op.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Literal

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.metrics import Counter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Span, SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from core import telemetry
from core.telemetry import Attribute

TELEMETRY_DIR = "BENCH_TELEMETRY_DIR"
APPINSIGHTS = "APPLICATIONINSIGHTS_CONNECTION_STRING"
OTLP = "OTEL_EXPORTER_OTLP_ENDPOINT"
SCOPE = "benchsvc"
ATTRIBUTE_PREFIX = "bench."
Mode = Literal["azure-monitor", "otlp", "file"]
_PROPAGATOR = TraceContextTextMapPropagator()


def mode(env: Mapping[str, str] | None = None) -> Mode | None:
    env = os.environ if env is None else env
    if env.get(APPINSIGHTS):
        return "azure-monitor"
    if env.get(OTLP):
        return "otlp"
    if env.get(TELEMETRY_DIR):
        return "file"
    return None


def setup(service: str, instance: str, *, azure_instrumentations: bool = False) -> Mode | None:
    """Install this process's tracer and meter providers (once, at start) and the core's
    sink. ``azure_instrumentations``: let the distro trace every Azure SDK and HTTP call
    (off: one span per queue poll or barrier read would drown the runs' traces)."""
    chosen = mode()
    if chosen is None:
        return None
    resource = Resource.create({"service.name": service, "service.instance.id": instance})
    if chosen == "azure-monitor":
        from azure.monitor.opentelemetry import configure_azure_monitor  # Azure only

        off = {"enabled": azure_instrumentations}
        configure_azure_monitor(
            resource=resource,
            enable_live_metrics=False,
            instrumentation_options={
                "azure_sdk": off,
                "requests": off,
                "urllib": off,
                "urllib3": off,
                "httpx": off,
                "fastapi": {"enabled": False},  # functions/telemetry.py instruments the app
            },
        )
    else:
        spans: SpanExporter
        readings: MetricExporter
        if chosen == "otlp":
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter,
            )
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            spans, readings = OTLPSpanExporter(), OTLPMetricExporter()
        else:
            spans, readings = _file_exporters(Path(os.environ[TELEMETRY_DIR]), service)
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(BatchSpanProcessor(spans))
        trace.set_tracer_provider(tracer_provider)
        reader = PeriodicExportingMetricReader(readings)
        metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=[reader]))
    telemetry.install(OtelSink())
    return chosen


def flush(timeout_ms: int = 5_000) -> None:
    """Export what is buffered now (before a process ends on purpose)."""
    for provider in (trace.get_tracer_provider(), metrics.get_meter_provider()):
        force = getattr(provider, "force_flush", None)
        if force is not None:
            force(timeout_ms)


def _file_exporters(directory: Path, service: str) -> tuple[SpanExporter, MetricExporter]:
    directory.mkdir(parents=True, exist_ok=True)
    stem = directory / f"{service}-{os.getpid()}"

    def append(suffix: str) -> IO[str]:
        return (stem.parent / f"{stem.name}.{suffix}.jsonl").open("a", buffering=1)

    def span_line(span: ReadableSpan) -> str:
        return json.dumps(json.loads(span.to_json()), separators=(",", ":")) + "\n"

    def metrics_line(data: MetricsData) -> str:
        return json.dumps(json.loads(data.to_json()), separators=(",", ":")) + "\n"

    return (
        ConsoleSpanExporter(out=append("spans"), formatter=span_line),
        ConsoleMetricExporter(out=append("metrics"), formatter=metrics_line),
    )


# ---- W3C trace context ------------------------------------------------------------------


def traceparent_of(span: Span) -> str | None:
    """The W3C ``traceparent`` of ``span`` (None for a no-op span)."""
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def current_traceparent() -> str | None:
    return traceparent_of(trace.get_current_span())


def context_of(traceparent: str | None) -> otel_context.Context | None:
    """A context whose parent is the span ``traceparent`` names (None when it names none)."""
    if not traceparent:
        return None
    ctx = _PROPAGATOR.extract({"traceparent": traceparent})
    return ctx if trace.get_current_span(ctx).get_span_context().is_valid else None


def headers() -> dict[str, str]:
    """The current span's trace context as HTTP headers (none outside a span)."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier


def prefixed(values: Mapping[str, Attribute]) -> dict[str, Attribute]:
    """Span attributes under the service's namespace (``bench.run_id``, ...)."""
    return {ATTRIBUTE_PREFIX + k: v for k, v in values.items()}


def tracer(provider: trace.TracerProvider | None = None) -> trace.Tracer:
    return trace.get_tracer(SCOPE, tracer_provider=provider)


@contextlib.contextmanager
def producer(queue: str, **ids: Attribute) -> Iterator[str | None]:
    """A message sent to ``queue``: its span, and the traceparent the message carries."""
    with tracer().start_as_current_span(
        f"send {queue}",
        kind=SpanKind.PRODUCER,
        attributes={
            "messaging.system": "azure_storage_queue",
            "messaging.destination.name": queue,
            **prefixed(ids),
        },
    ) as span:
        yield traceparent_of(span)


# ---- the core's sink -----------------------------------------------------------------------


class _SpanHandle:
    def __init__(self, span: Span) -> None:
        self._span = span

    @property
    def traceparent(self) -> str | None:
        return traceparent_of(self._span)

    def set(self, key: str, value: Attribute) -> None:
        self._span.set_attribute(ATTRIBUTE_PREFIX + key, value)


class OtelSink:
    """core.telemetry's spans and counters as OpenTelemetry's (the process's providers
    unless others are given)."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self._tracer = tracer(tracer_provider)
        self._meter = metrics.get_meter(SCOPE, meter_provider=meter_provider)
        self._counters: dict[str, Counter] = {}

    @contextlib.contextmanager
    def span(
        self, name: str, parent: str | None, attributes: Mapping[str, Attribute]
    ) -> Iterator[telemetry.Span]:
        ctx = context_of(parent)
        current = trace.get_current_span().get_span_context()
        if ctx is not None and current.is_valid:
            wanted = trace.get_current_span(ctx).get_span_context().trace_id
            if current.trace_id == wanted:
                ctx = None  # already inside the run's trace: nest under what runs now
        with self._tracer.start_as_current_span(
            name, context=ctx, attributes=prefixed(attributes)
        ) as span:
            yield _SpanHandle(span)

    def count(self, name: str, attributes: Mapping[str, str]) -> None:
        counter = self._counters.get(name)
        if counter is None:
            counter = self._counters[name] = self._meter.create_counter(name)
        counter.add(1, dict(attributes))
