"""One CosmosClient shared by the API's worker threads, without the SDK's header race.

azure-cosmos keeps the headers of "the last response" in one attribute of the client
connection (``last_response_headers``) and writes into it after every call
(``_retry_utility`` sets the throttle counters on it). When thread A has just stored its
response's headers there and is copying them (``_capture_internal_headers``), thread B
finishing its own call writes into A's headers object: ``RuntimeError: OrderedDict mutated
during iteration``, a 500 for A's caller (measured: 1 of 1,717 GETs at 32 callers). The SDK's
maintainers say the attribute is not thread safe (Azure/azure-sdk-for-python#35791).

Every reader of that attribute inside the SDK reads it on the thread that made the call,
right after making it, so giving each thread its own value is what the SDK assumes. One
client (and so one session-token container and one connection pool) stays shared: separate
clients per thread would lose read-your-writes under Session consistency across threads.
"""

from __future__ import annotations

import threading
from typing import Any

from azure.cosmos import CosmosClient
from requests.structures import CaseInsensitiveDict


class _PerThreadHeaders:
    """A data descriptor: ``connection.last_response_headers`` per thread."""

    def __init__(self) -> None:
        self._local = threading.local()

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        if instance is None:
            return self
        value = getattr(self._local, "headers", None)
        if value is None:
            value = CaseInsensitiveDict()
            self._local.headers = value
        return value

    def __set__(self, instance: object, value: Any) -> None:
        self._local.headers = value


_patched: dict[type, type] = {}
_lock = threading.Lock()


def per_thread_headers(client: CosmosClient) -> CosmosClient:
    """Give ``client``'s connection a per-thread ``last_response_headers`` (a subclass of its
    connection class, made once, holding the descriptor) and return the client."""
    connection = client.client_connection
    cls = type(connection)
    if isinstance(cls.__dict__.get("last_response_headers"), _PerThreadHeaders):
        return client
    with _lock:
        sub = _patched.get(cls)
        if sub is None:
            sub = type(cls.__name__, (cls,), {"last_response_headers": _PerThreadHeaders()})
            _patched[cls] = sub
    # The instance's own attribute would shadow nothing (a data descriptor wins), but drop
    # it so no thread ever sees the shared object again.
    connection.__dict__.pop("last_response_headers", None)
    connection.__class__ = sub
    return client
