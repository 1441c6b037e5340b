"""What the queue and blob adapters share: how they sign in to a Storage account, and how
long they may wait for it.

A request to the API must not hang on an unreachable Storage account (issue 12.2: intake
waited 90 s on the SDK's default retries). Each call gets one retry and short socket
timeouts, so it fails within a few seconds with StoreUnavailable; what must happen anyway
is retried by its owner (the run's outbox on the timer, the agent's poll loop). The API
makes no second attempt at all: a caller is waiting, and the outbox retries.
"""

from __future__ import annotations

from typing import TypedDict
from urllib.parse import urlparse

from azure.core.credentials import TokenCredential
from azure.core.pipeline.transport import RequestsTransport
from azure.storage.queue import ExponentialRetry

from adapters.config import LOOPBACK_HOSTS, ConfigError, azure_credential
from adapters.local import AZURITE_ACCOUNT, AZURITE_KEY
from adapters.transport import POOL_SIZE, pooled_transport

CONNECT_TIMEOUT_S = 2
READ_TIMEOUT_S = 3


class ClientOptions(TypedDict):
    """The Storage SDK clients' keyword arguments this project sets."""

    connection_timeout: int
    read_timeout: int
    retry_policy: ExponentialRetry
    transport: RequestsTransport


def bounded_client_options(
    retries: int = 1, read_timeout_s: int = READ_TIMEOUT_S, pool_size: int = POOL_SIZE
) -> ClientOptions:
    """Keyword arguments for a Storage service client: at most ``retries`` + 1 attempts of
    a few seconds each (the queue and the blob SDK take the same policy). A caller that
    would rather wait than give up (the simulated fleet against a busy Azurite) may allow
    a longer ``read_timeout_s``. Its connections are pooled for the threads that share the
    client (adapters/transport.py)."""
    return {
        "connection_timeout": CONNECT_TIMEOUT_S,
        "read_timeout": read_timeout_s,
        "retry_policy": ExponentialRetry(
            initial_backoff=1, increment_base=2, retry_total=retries, random_jitter_range=0
        ),
        "transport": pooled_transport(
            pool_size, connection_timeout=CONNECT_TIMEOUT_S, read_timeout=read_timeout_s
        ),
    }


def storage_credential(
    uri: str, *, local_emulators: bool, client_id: str | None
) -> dict[str, str] | TokenCredential:
    """Azurite's well-known account on loopback locally; the managed identity in Azure."""
    if local_emulators:
        if urlparse(uri).hostname not in LOOPBACK_HOSTS:
            raise ConfigError(f"local emulator mode only talks to loopback, not {uri}")
        return {"account_name": AZURITE_ACCOUNT, "account_key": AZURITE_KEY}
    return azure_credential(client_id)
