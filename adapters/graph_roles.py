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
from typing import TypeVar

import httpx
from azure.core.credentials import TokenCredential
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.chat.identity import DirectoryEntry
from core.errors import StoreUnavailable

TTL_S = 300.0
MAX_PAGES = 50  # 50 x 999 assignments: far more than a benchmark service has


class _Graph(BaseModel):
    """A Graph answer: the fields read here (Graph sends more, e.g. @odata.context)."""

    model_config = ConfigDict(extra="ignore")


class GraphUser(_Graph):
    id: str = ""
    user_principal_name: str | None = Field(None, alias="userPrincipalName")


class MemberObjects(_Graph):
    """getMemberObjects: the ids of the groups (and roles) the user is in, transitively."""

    value: list[str] = Field(default_factory=list)


class AppRole(_Graph):
    id: str
    value: str | None = None  # the role's claim value (Bench.Reader, ...); None for some


class ServicePrincipal(_Graph):
    id: str
    app_roles: list[AppRole] = Field(default_factory=list, alias="appRoles")


class AppRoleAssignment(_Graph):
    principal_id: str = Field(alias="principalId")
    app_role_id: str | None = Field(None, alias="appRoleId")


class AssignmentsPage(_Graph):
    value: list[AppRoleAssignment] = Field(default_factory=list)
    next_link: str | None = Field(None, alias="@odata.nextLink")


Answer = TypeVar("Answer", bound=_Graph)


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
            user = self._get(f"/v1.0/users/{object_id}?$select=id,userPrincipalName", GraphUser)
        except httpx.HTTPStatusError as e:
            if e.response.status_code != 404:
                raise StoreUnavailable(f"Microsoft Graph: {e}", "Microsoft Graph") from e
            return DirectoryEntry("", ())  # not a user of this tenant: no role here
        except (httpx.HTTPError, ValueError) as e:
            raise StoreUnavailable(
                f"Microsoft Graph: {type(e).__name__}: {e}", "Microsoft Graph"
            ) from e
        try:
            groups = self._post(
                f"/v1.0/users/{object_id}/getMemberObjects",
                {"securityEnabledOnly": False},
                MemberObjects,
            )
        except (httpx.HTTPError, ValueError) as e:
            raise StoreUnavailable(
                f"Microsoft Graph: {type(e).__name__}: {e}", "Microsoft Graph"
            ) from e
        principals = {object_id, *groups.value}
        roles = sorted({r for p in principals for r in assigned.get(p, set())})
        entry = DirectoryEntry(user.user_principal_name or "", tuple(roles))
        with self._lock:
            self._users[object_id] = (now, entry)
        return entry

    def _assignments(self, now: float) -> dict[str, set[str]]:
        with self._lock:
            cached = self._assigned
        if cached and now - cached[0] < self._ttl_s:
            return cached[1]
        sp = self._get(
            f"/v1.0/servicePrincipals(appId='{self._api_app_id}')?$select=id,appRoles",
            ServicePrincipal,
        )
        values = {r.id: r.value for r in sp.app_roles if r.value}
        assigned: dict[str, set[str]] = {}
        url: str | None = (
            f"/v1.0/servicePrincipals/{sp.id}/appRoleAssignedTo"
            "?$select=principalId,appRoleId&$top=999"
        )
        for _ in range(MAX_PAGES):
            if url is None:
                break
            page = self._get(url, AssignmentsPage)
            for a in page.value:
                role = values.get(str(a.app_role_id))
                if role:
                    assigned.setdefault(a.principal_id, set()).add(role)
            url = page.next_link
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

    def _get(self, path: str, answer: type[Answer]) -> Answer:
        r = self._http.get(self._url(path), headers=self._headers())
        r.raise_for_status()
        return _read(r, answer)

    def _post(self, path: str, body: dict[str, bool], answer: type[Answer]) -> Answer:
        r = self._http.post(self._url(path), headers=self._headers(), json=body)
        r.raise_for_status()
        return _read(r, answer)


def _read(response: httpx.Response, answer: type[Answer]) -> Answer:
    """Graph's JSON as its model; an answer not of that shape is a ValueError, as bad JSON
    is (the caller then says Graph cannot answer)."""
    try:
        return answer.model_validate_json(response.content)
    except ValidationError as e:
        raise ValueError(f"unexpected answer: {e.error_count()} error(s)") from None
