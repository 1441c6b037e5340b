"""The HTTP transport every Azure SDK client of this project uses: a connection pool as
large as the number of threads that share the client, and one TLS context for all of its
connections.

requests keeps 10 connections per host by default. The API's 64 worker threads share one
client per service, and a step's sender and a finalizer's timeline reads run 32 at a time
(adapters/queue.py, core/runs/finalize.py): beyond 10 concurrent calls each finished call
discarded its connection and the next opened a new one (a TLS handshake in Azure; with 16
agents polling, most of the API's CPU went to TLS set-up before the Cosmos DB client's
pool was sized).

Each new TLS connection also got a context of its own from urllib3, into which it loaded
the system's certificates (or certifi's bundle): about 50 ms of CPU per connection
(measured against the Cosmos DB stand-in, 64 threads opening 46 connections: 2.3 CPU-s
more than the same reads on open connections), 18 % of an API instance's samples during a
100-simulated-client run. The context here is built and its bundle loaded once per process.
"""

from __future__ import annotations

import ssl
import threading
import urllib.request
from typing import Any

import certifi
import requests
from azure.core.pipeline.transport import RequestsTransport
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry
from urllib3.util.ssl_ import create_urllib3_context

# The API's worker threads (functions/api.py): the most calls in flight on one client.
POOL_SIZE = 64


# One context per process and mode, built on first use: loading the bundle costs ~24 ms,
# and a simulated fleet makes a client per simulated agent (1,000 contexts were 24 CPU-s of
# its start-up).
_contexts: dict[bool, ssl.SSLContext] = {}
_contexts_lock = threading.Lock()


def tls_context(verify: bool) -> ssl.SSLContext:
    """Verifying: certifi's bundle, as requests verifies by default. Not verifying (the
    local Cosmos DB server's self-signed certificate, on loopback only): no checks."""
    with _contexts_lock:
        if verify not in _contexts:
            if verify:
                context = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED)
                context.load_verify_locations(certifi.where())
            else:
                context = create_urllib3_context(cert_reqs=ssl.CERT_NONE)
            _contexts[verify] = context
        return _contexts[verify]


class SharedTLSAdapter(HTTPAdapter):
    """requests' adapter with every connection's TLS from one context (``verify`` must be
    what the client passes with each request: a request that says otherwise fails)."""

    def __init__(self, verify: bool, **kwargs: Any) -> None:
        self.verify = verify
        self.context = tls_context(verify)  # before HTTPAdapter's init builds the pools
        super().__init__(**kwargs)

    def init_poolmanager(
        self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any
    ) -> None:
        pool_kwargs["ssl_context"] = self.context
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)

    def cert_verify(self, conn: Any, url: str, verify: bool | str, cert: Any) -> None:
        super().cert_verify(conn, url, verify, cert)
        if url.lower().startswith("https") and verify is True:
            # The context holds the bundle already: loading it again per connection is
            # the cost this adapter saves.
            conn.ca_certs = None
            conn.ca_cert_dir = None


def pooled_transport(
    size: int = POOL_SIZE,
    *,
    connection_timeout: int = 300,
    read_timeout: int = 300,
    verify: bool = True,
) -> RequestsTransport:
    """A transport that keeps ``size`` connections per host; the SDK does the retries. The
    Storage SDK takes its timeouts from the transport it is given, not from its client's
    keywords (azure-core's own defaults are 300 s each)."""
    session = requests.Session()
    # With trust_env, requests looks in the environment for proxies and reads ~/.netrc on
    # every request: ~10 % of a simulated fleet's busy time and ~3 % of the API's while a
    # thousand clients reported (issue 29). With no proxy configured there is nothing for
    # it to find but netrc credentials, which would only displace the SDK's own
    # Authorization header. A proxy in the environment keeps requests' own handling.
    session.trust_env = bool(urllib.request.getproxies())
    adapter = SharedTLSAdapter(
        verify,
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
