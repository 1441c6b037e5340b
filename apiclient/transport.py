"""The httpx client to the API and the one reading of its answers: ``Unavailable`` for what
may pass (no answer, a timeout, 429, a 5xx), ``Refused`` for an answer (a 4xx), with its
status and JSON body. The agent and the CLI each turn these into their own errors."""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential


class Unavailable(Exception):
    """No answer, a timeout, 429 or a 5xx: may pass (a restart, a cold start)."""


class Refused(Exception):
    """The API answered 4xx: an answer, not a failure to retry."""

    def __init__(self, status: int, text: str, body: Any) -> None:
        super().__init__(f"API answered {status}: {text[:500]}")
        self.status = status
        self.text = text
        self.body = body  # the parsed JSON, or None when the body is not JSON


class Transport:
    """One connection to the API. ``door`` (X-Bench-Door) says which way a person came in
    (cli, pipeline); ``api_key`` is the local stack's X-Api-Key; with ``credential`` and
    ``scope`` every request carries an Entra ID token (``auth.EntraAuth``)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        door: str | None = None,
        credential: TokenCredential | None = None,
        scope: str | None = None,
        timeout: float = 30.0,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {}
        if door:
            headers["X-Bench-Door"] = door
        if api_key:
            headers["X-Api-Key"] = api_key
        auth: httpx.Auth | None = None
        if credential is not None and scope:
            from apiclient.auth import LOOPBACK_HOSTS, EntraAuth  # azure-core: only when signing

            url = httpx.URL(self.base_url)
            if url.scheme != "https" and url.host not in LOOPBACK_HOSTS:
                raise ValueError(f"{self.base_url}: a token is sent only over https")
            auth = EntraAuth(credential, scope)
        # ``verify``: an SSL context to share (simagent's thousand clients: loading the CA
        # bundle for each took 0.3 s and 0.85 MiB).
        self._http = httpx.Client(
            base_url=self.base_url, timeout=timeout, headers=headers, auth=auth, verify=verify
        )

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """One attempt: the response of a 2xx or 3xx, else ``Unavailable`` or ``Refused``."""
        try:
            r = self._http.request(method, path, **kw)
        except httpx.TransportError as e:  # refused, reset, timed out
            raise Unavailable(f"cannot reach the API at {self.base_url}: {e!r}") from e
        if r.status_code >= 500 or r.status_code == 429:
            raise Unavailable(f"API answered {r.status_code}: {r.text[:300]}")
        if r.status_code >= 400:
            try:
                body = r.json()
            except ValueError:
                body = None
            raise Refused(r.status_code, r.text, body)
        return r

    def close(self) -> None:
        self._http.close()
