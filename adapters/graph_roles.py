"""A Teams user's Bench.* roles, from Microsoft Graph: the app role assignments on the API's
own registration, to the user or to any group they are in (transitively), so the bot gives
each person the role the REST API gives them. Read with the Function App's identity, which
needs the Graph application permissions Application.Read.All and GroupMember.Read.All and
User.ReadBasic.All (docs/deploy.md, "The Teams bot").

The service principal's assignments and each user's answer are kept for a few minutes: a new
assignment reaches the bot within ``ttl_s``, and a chat costs no Graph call per message.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
from azure.core.credentials import TokenCredential

from core.chat.identity import DirectoryEntry
from core.errors import StoreUnavailable

TTL_S = 300.0
MAX_PAGES = 50  # 50 x 999 assignments: far more than a benchmark service has


class GraphRoles:
    def __init__(
        self,
        graph_url: str,
        api_app_id: str,
        credential: TokenCredential,
        *,
        ttl_s: float = TTL_S,
        timeout_s: float = 5.0,
    ) -> None:
        self._graph = graph_url.rstrip("/")
        self._api_app_id = api_app_id
        self._credential = credential
        self._ttl_s = ttl_s
        self._http = httpx.Client(timeout=timeout_s, follow_redirects=False)
        self._lock = threading.Lock()
        self._assigned: tuple[float, dict[str, set[str]]] | None = None  # principal -> roles
        self._users: dict[str, tuple[float, DirectoryEntry]] = {}

    def lookup(self, object_id: str) -> DirectoryEntry:
        """The user's principal name and Bench.* app roles; raises StoreUnavailable when
        Graph cannot answer (the bot then says so rather than guess a role)."""
        now = time.monotonic()
        with self._lock:
            known = self._users.get(object_id)
        if known and now - known[0] < self._ttl_s:
            return known[1]
        try:
            assigned = self._assignments(now)
            user = self._get(f"/v1.0/users/{object_id}?$select=id,userPrincipalName")
        except httpx.HTTPStatusError as e:
            if e.response.status_code != 404:
                raise StoreUnavailable(f"Microsoft Graph: {e}", "Microsoft Graph") from e
            return DirectoryEntry("", ())  # not a user of this tenant: no role here
        except (httpx.HTTPError, ValueError, KeyError) as e:
            raise StoreUnavailable(
                f"Microsoft Graph: {type(e).__name__}: {e}", "Microsoft Graph"
            ) from e
        try:
            groups = self._post(
                f"/v1.0/users/{object_id}/getMemberObjects", {"securityEnabledOnly": False}
            )
        except (httpx.HTTPError, ValueError, KeyError) as e:
            raise StoreUnavailable(
                f"Microsoft Graph: {type(e).__name__}: {e}", "Microsoft Graph"
            ) from e
        principals = {object_id, *(str(g) for g in groups.get("value", []))}
        roles = sorted({r for p in principals for r in assigned.get(p, set())})
        entry = DirectoryEntry(str(user.get("userPrincipalName") or ""), tuple(roles))
        with self._lock:
            self._users[object_id] = (now, entry)
        return entry

    def _assignments(self, now: float) -> dict[str, set[str]]:
        with self._lock:
            cached = self._assigned
        if cached and now - cached[0] < self._ttl_s:
            return cached[1]
        sp = self._get(f"/v1.0/servicePrincipals(appId='{self._api_app_id}')?$select=id,appRoles")
        values = {str(r["id"]): str(r["value"]) for r in sp.get("appRoles", []) if r.get("value")}
        assigned: dict[str, set[str]] = {}
        url: str | None = (
            f"/v1.0/servicePrincipals/{sp['id']}/appRoleAssignedTo"
            "?$select=principalId,appRoleId&$top=999"
        )
        for _ in range(MAX_PAGES):
            if url is None:
                break
            page = self._get(url)
            for a in page.get("value", []):
                role = values.get(str(a.get("appRoleId")))
                if role:
                    assigned.setdefault(str(a["principalId"]), set()).add(role)
            url = page.get("@odata.nextLink")
        with self._lock:
            self._assigned = (now, assigned)
        return assigned

    def _headers(self) -> dict[str, str]:
        token = self._credential.get_token(f"{self._graph}/.default").token
        return {"Authorization": f"Bearer {token}", "Accept": "application/json"}

    def _url(self, path: str) -> str:
        # nextLink is absolute; it must still be Graph's own address.
        if path.startswith(("http://", "https://")):
            if not path.startswith(self._graph + "/"):
                raise ValueError("Graph's next page points elsewhere")
            return path
        return self._graph + path

    def _get(self, path: str) -> dict[str, Any]:
        r = self._http.get(self._url(path), headers=self._headers())
        r.raise_for_status()
        data: dict[str, Any] = r.json()
        return data

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = self._http.post(self._url(path), headers=self._headers(), json=body)
        r.raise_for_status()
        data: dict[str, Any] = r.json()
        return data
