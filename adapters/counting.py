"""Counting the calls to Cosmos DB, the queues and Blob Storage (bench/scale.py), off by
default.

With ``BENCH_COUNT_CALLS`` set to a file, every HTTP request the Cosmos, Queue and Blob
clients send (each attempt: what Azure bills) appends one line to it: ``<unix s> <pid>
<service> <operation>``. The hook is azure-core's ``raw_request_hook``, which both SDKs run
after their retry policy, so a retried call counts once per attempt. One ``write`` of a
short line to a file opened with O_APPEND: lines of several processes never interleave.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypedDict
from urllib.parse import urlparse

from azure.core.pipeline import PipelineRequest
from azure.core.pipeline.transport import HttpRequest

SETTING = "BENCH_COUNT_CALLS"
Service = str  # cosmos, queue, blob, api


def _cosmos(method: str, path: str, headers: Mapping[str, str]) -> str:
    parts = path.strip("/").split("/")
    if "docs" not in parts:
        return "other"  # databases, containers, partition key ranges: the SDK's metadata
    by_id = parts[-1] != "docs"
    if method == "GET":
        return "read" if by_id else "query"  # a read feed is a query without a filter
    if method == "POST":
        if headers.get("x-ms-cosmos-is-batch-request", "").lower() == "true":
            return "batch"  # a transactional batch: one request, billed per operation in it
        if headers.get("x-ms-documentdb-isquery", "").lower() == "true":
            return "query"
        if headers.get("Content-Type", "").startswith("application/query+json"):
            return "query"
        if headers.get("x-ms-documentdb-is-upsert", "").lower() == "true":
            return "upsert"
        return "create"
    return {"PUT": "replace", "PATCH": "patch", "DELETE": "delete"}.get(method, "other")


def _queue(method: str, path: str, query: str) -> str:
    parts = path.strip("/").split("/")
    if "messages" not in parts:
        return "other"  # creating a queue, its properties
    one = parts[-1] != "messages"
    if method == "POST":
        return "send"
    if method == "GET":
        return "peek" if "peekonly=true" in query.lower() else "receive"
    if method == "DELETE":
        return "delete" if one else "clear"
    if method == "PUT" and one:
        return "update"
    return "other"


def operation(service: Service, method: str, url: str, headers: Mapping[str, str]) -> str:
    """What one HTTP request to ``service`` is, in the terms of its price list."""
    parsed = urlparse(url)
    method = method.upper()
    if service == "cosmos":
        return _cosmos(method, parsed.path, headers)
    if service == "queue":
        return _queue(method, parsed.path, parsed.query)
    return {"GET": "get", "PUT": "put", "HEAD": "head", "DELETE": "delete"}.get(method, "other")


# The file each process appends to, kept open: opening and closing it for every call was
# 3-4 % of an API instance's samples under a 100-client bench (its own cost, not the
# service's). Appends of a line each are atomic between processes (O_APPEND).
_open: dict[str, int] = {}
_open_lock = threading.Lock()


def _fd(path: str) -> int:
    with _open_lock:
        if path not in _open:
            _open[path] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return _open[path]


def record(service: Service, op: str) -> None:
    """Append one call to the file ``BENCH_COUNT_CALLS`` names (nothing when unset)."""
    path = os.environ.get(SETTING)
    if not path:
        return
    os.write(_fd(path), f"{time.time():.4f} {os.getpid()} {service} {op}\n".encode())


class ClientHooks(TypedDict, total=False):
    """Keyword arguments azure-core's pipeline takes (CustomHookPolicy)."""

    raw_request_hook: Callable[[PipelineRequest[HttpRequest]], None]


def hooks(service: Service) -> ClientHooks:
    """Keyword arguments for an SDK client: the counting hook when counting is on."""
    if not os.environ.get(SETTING):
        return {}

    def hook(request: PipelineRequest[HttpRequest]) -> None:
        http = request.http_request
        record(service, operation(service, http.method, http.url, http.headers))

    return {"raw_request_hook": hook}


# Read back (the benches): per service, the operations a line may name.
DB_OPS = ("read", "query", "create", "batch", "upsert", "replace", "patch", "delete", "other")
QUEUE_OPS = ("send", "receive", "delete", "update", "peek", "other")
BLOB_OPS = ("put", "get", "head", "delete", "other")


def read_calls(path: Path) -> list[tuple[float, int, str, str]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        t, pid, service, op = line.split()
        out.append((float(t), int(pid), service, op))
    return out


def per_client(
    calls: list[tuple[float, int, str, str]], window: tuple[float, float], n: int, scale: float = 1
) -> dict[str, Any]:
    inside = Counter((s, op) for t, _, s, op in calls if window[0] <= t <= window[1])

    def of(service: str, ops: tuple[str, ...]) -> dict[str, float]:
        return {op: round(inside[(service, op)] * scale / n, 2) for op in ops}

    return {
        "db_calls": of("cosmos", DB_OPS),
        "queue": of("queue", QUEUE_OPS),
        "blob": of("blob", BLOB_OPS),
        "http_requests": round(sum(v for (s, _), v in inside.items() if s == "api") * scale / n, 2),
    }
