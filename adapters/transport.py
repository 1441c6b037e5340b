"""The HTTP transport every Azure SDK client of this project uses: a connection pool as
large as the number of threads that share the client.

requests keeps 10 connections per host by default. The API's 64 worker threads share one
client per service, and a step's sender and a finalizer's timeline reads run 32 at a time
(adapters/queue.py, core/runs/finalize.py): beyond 10 concurrent calls each finished call
discarded its connection and the next opened a new one (a TLS handshake in Azure; with 16
agents polling, most of the API's CPU went to TLS set-up before the Cosmos DB client's
pool was sized).
"""

from __future__ import annotations

import requests
from azure.core.pipeline.transport import RequestsTransport
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

# The API's worker threads (functions/api.py): the most calls in flight on one client.
POOL_SIZE = 64


def pooled_transport(
    size: int = POOL_SIZE, *, connection_timeout: int = 300, read_timeout: int = 300
) -> RequestsTransport:
    """A transport that keeps ``size`` connections per host; the SDK does the retries. The
    Storage SDK takes its timeouts from the transport it is given, not from its client's
    keywords (azure-core's own defaults are 300 s each)."""
    session = requests.Session()
    adapter = HTTPAdapter(
        pool_connections=4,
        pool_maxsize=size,
        max_retries=Retry(total=False, redirect=False, raise_on_status=False),
    )
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return RequestsTransport(
        session=session,
        session_owner=False,
        connection_timeout=connection_timeout,
        read_timeout=read_timeout,
    )
