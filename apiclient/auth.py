"""Entra ID bearer tokens for httpx, from azure-core's ``BearerTokenCredentialPolicy``.

The policy keeps the token and asks the credential again only within 5 minutes of its
expiry, so a caller polling every second (``benchctl run --wait``, an agent at the barrier)
does not run ``az account get-access-token`` or hit the instance metadata endpoint each time
(AzureCliCredential keeps no cache of its own). The policy also refuses to put a token on a
plain-http URL; loopback (the local stack) is the one exception.
"""

from __future__ import annotations

import threading
from collections.abc import Generator

import httpx
from azure.core.credentials import TokenCredential
from azure.core.pipeline import PipelineContext, PipelineRequest
from azure.core.pipeline.policies import BearerTokenCredentialPolicy
from azure.core.rest import HttpRequest, HttpResponse

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class EntraAuth(httpx.Auth):
    def __init__(self, credential: TokenCredential, scope: str) -> None:
        self._policy: BearerTokenCredentialPolicy[HttpRequest, HttpResponse] = (
            BearerTokenCredentialPolicy(credential, scope)
        )
        # The agent's heartbeat thread and its worker share one client: one token request.
        self._lock = threading.Lock()

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        loopback = request.url.host in LOOPBACK_HOSTS
        signed = PipelineRequest(
            HttpRequest(request.method, str(request.url)),
            PipelineContext(None, enforce_https=not loopback),
        )
        with self._lock:
            self._policy.on_request(signed)
        request.headers["Authorization"] = signed.http_request.headers["Authorization"]
        yield request
