"""What the Teams bot talks to, on loopback, for the tests: one HTTP server that plays

- a token issuer: its OpenID configuration and signing keys (JWKS), and the tokens the
  tests sign as the channel would (Bot Framework's shape: iss, aud = the bot's app id,
  serviceurl);
- the platform's managed identity endpoint (App Service's protocol, which the SDK's MSAL
  connection and azure-identity use in a Function App): tokens for the bot's identity;
- Microsoft Graph's few calls that give a user's app roles (adapters/graph_roles.py);
- the Bot Connector (Bot Framework REST v3): it records every activity the bot sends or
  updates, and whether its bearer token verifies against the issuer's key.

Nothing here is the code under test; every request the bot makes is a real HTTP request.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from tests.loopback import Quiet, serve

BOT_APP_ID = "7f3b0c9e-5a41-4a8e-9d2c-1b6e0f4a2c11"
TENANT_ID = "4d1e2f30-8b7a-4c6d-9e5f-0a1b2c3d4e5f"
API_APP_ID = "c0ffee00-1234-4abc-8def-0123456789ab"
SP_ID = "5e5e5e5e-0000-4000-8000-000000000001"
IDENTITY_HEADER = "test-identity-header-value"
KID = "test-key-1"
ROLE_IDS = {
    "Bench.Reader": "00000000-0000-4000-8000-0000000000a1",
    "Bench.Runner": "00000000-0000-4000-8000-0000000000a2",
    "Bench.Engineer": "00000000-0000-4000-8000-0000000000a3",
    "Bench.Admin": "00000000-0000-4000-8000-0000000000a4",
}


@dataclass(frozen=True)
class User:
    oid: str
    name: str
    upn: str


ALICE = User("a11ce000-0000-4000-8000-000000000001", "Alice Runner", "alice@contoso.test")
BOB = User("b0b00000-0000-4000-8000-000000000002", "Bob Engineer", "bob@contoso.test")
CAROL = User("ca201000-0000-4000-8000-000000000003", "Carol Nobody", "carol@contoso.test")
DAVE = User("da7e0000-0000-4000-8000-000000000004", "Dave Reader", "dave@contoso.test")
ENGINEERS_GROUP = "90000000-0000-4000-8000-0000000000e1"
USERS = {u.oid: u for u in (ALICE, BOB, CAROL, DAVE)}
# Alice and Dave are assigned directly, Bob through a group, Carol not at all.
ASSIGNMENTS = [
    (ALICE.oid, "Bench.Runner"),
    (DAVE.oid, "Bench.Reader"),
    (ENGINEERS_GROUP, "Bench.Engineer"),
]
GROUPS = {BOB.oid: [ENGINEERS_GROUP]}


@dataclass
class Sent:
    method: str
    conversation: str
    activity_id: str | None  # replied to (POST) or updated (PUT)
    body: dict[str, Any]
    token_ok: bool
    new_id: str

    def card(self) -> dict[str, Any]:
        content: dict[str, Any] = self.body["attachments"][0]["content"]
        return content


@dataclass
class World:
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    sent: list[Sent] = field(default_factory=list)
    graph_calls: list[str] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def issuer(self) -> str:
        return f"{self.base}/issuer"

    @property
    def service_url(self) -> str:
        return f"{self.base}/connector/"

    def env(self) -> dict[str, str]:
        """The API's settings for a bot that trusts this world."""
        return {
            "BENCH_BOT_APP_ID": BOT_APP_ID,
            "BENCH_BOT_TENANT_ID": TENANT_ID,
            "BENCH_BOT_ISSUERS": json.dumps(
                {self.issuer: f"{self.issuer}/.well-known/openid-configuration"}
            ),
            "BENCH_API_APP_ID": API_APP_ID,
            "BENCH_GRAPH_URL": f"{self.base}/graph",
            # The platform's managed identity endpoint, as a Function App has it.
            "IDENTITY_ENDPOINT": f"{self.base}/msi/token",
            "IDENTITY_HEADER": IDENTITY_HEADER,
        }

    def token(
        self,
        *,
        aud: str = BOT_APP_ID,
        service_url: str | None = None,
        key: rsa.RSAPrivateKey | None = None,
        issuer: str | None = None,
        lifetime_s: int = 3600,
        **claims: Any,
    ) -> str:
        now = int(time.time())
        payload = {
            "iss": issuer or self.issuer,
            "aud": aud,
            "nbf": now - 5,
            "exp": now + lifetime_s,
            "serviceurl": service_url or self.service_url,
            **claims,
        }
        return jwt.encode(payload, key or self.key, algorithm="RS256", headers={"kid": KID})

    def verifies(self, token: str, audience: str) -> bool:
        try:
            jwt.decode(token, self.key.public_key(), algorithms=["RS256"], audience=audience)
            return True
        except jwt.PyJWTError:
            return False

    def sent_to(self, conversation: str) -> list[Sent]:
        with self.lock:
            return [s for s in self.sent if s.conversation == conversation]

    def start(self) -> World:
        self.server, _ = serve(_handler(self))
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()


def activity(
    world: World,
    *,
    text: str | None = None,
    user: User = ALICE,
    conversation: str = "a:personal-alice",
    kind: str = "personal",
    type_: str = "message",
    value: dict[str, Any] | None = None,
    reply_to: str | None = None,
) -> dict[str, Any]:
    """An activity as Teams sends it in a personal chat, a group chat or a channel (where
    the text starts with the bot's @mention)."""
    act: dict[str, Any] = {
        "type": type_,
        "id": f"1{uuid.uuid4().int % 10**12:012d}",
        "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        "serviceUrl": world.service_url,
        "channelId": "msteams",
        "from": {"id": f"29:{user.oid[:8]}", "name": user.name, "aadObjectId": user.oid},
        "recipient": {"id": f"28:{BOT_APP_ID}", "name": "Bench"},
        "conversation": {
            "id": conversation,
            "conversationType": kind,
            "isGroup": kind != "personal",
            "tenantId": TENANT_ID,
        },
        "channelData": {"tenant": {"id": TENANT_ID}},
        "locale": "en-US",
    }
    if text is not None:
        if kind == "channel":
            act["text"] = f"<at>Bench</at> {text}"
            act["entities"] = [
                {
                    "type": "mention",
                    "text": "<at>Bench</at>",
                    "mentioned": {"id": f"28:{BOT_APP_ID}", "name": "Bench"},
                }
            ]
            act["channelData"]["channel"] = {"id": conversation.split(";")[0]}
            act["channelData"]["team"] = {"id": "19:team@thread.tacv2"}
        else:
            act["text"] = text
    if value is not None:
        act["name"] = "adaptiveCard/action"
        act["value"] = value
    if reply_to:
        act["replyToId"] = reply_to
    return act


def press(
    world: World, verb: str, *, user: User = ALICE, card_id: str | None = None, **data: Any
) -> dict[str, Any]:
    """A card's Action.Execute, as Teams invokes the bot with it."""
    return activity(
        world,
        user=user,
        type_="invoke",
        value={
            "action": {"type": "Action.Execute", "verb": verb, "data": data},
            "trigger": "manual",
        },
        reply_to=card_id,
    )


def _handler(world: World) -> type[BaseHTTPRequestHandler]:
    class Handler(Quiet):
        def _json(self, status: int, body: Any) -> None:
            raw = json.dumps(body).encode()
            self.send_body(status, raw, "application/json")

        def _body(self) -> Any:
            n = int(self.headers.get("Content-Length", "0"))
            return json.loads(self.rfile.read(n) or b"{}")

        def _bearer(self, audience: str) -> bool:
            auth = self.headers.get("Authorization", "")
            return auth.startswith("Bearer ") and world.verifies(auth[7:], audience)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            path = unquote(url.path)
            if path == "/issuer/.well-known/openid-configuration":
                return self._json(200, {"issuer": world.issuer, "jwks_uri": f"{world.issuer}/keys"})
            if path == "/issuer/keys":
                jwk = json.loads(RSAAlgorithm.to_jwk(world.key.public_key()))
                return self._json(
                    200, {"keys": [{**jwk, "kid": KID, "use": "sig", "alg": "RS256"}]}
                )
            if path == "/msi/token":
                return self._msi(parse_qs(url.query))
            if path.startswith("/graph/"):
                return self._graph("GET", path[len("/graph") :])
            return self._json(404, {"error": "not here"})

        def do_POST(self) -> None:
            path = unquote(urlsplit(self.path).path)
            if path.startswith("/graph/"):
                return self._graph("POST", path[len("/graph") :])
            if path.startswith("/connector/v3/conversations/"):
                return self._connector("POST", path)
            return self._json(404, {"error": "not here"})

        def do_PUT(self) -> None:
            path = unquote(urlsplit(self.path).path)
            if path.startswith("/connector/v3/conversations/"):
                return self._connector("PUT", path)
            return self._json(404, {"error": "not here"})

        def _msi(self, query: dict[str, list[str]]) -> None:
            if self.headers.get("X-IDENTITY-HEADER") != IDENTITY_HEADER:
                return self._json(401, {"error": "bad identity header"})
            resource = query.get("resource", [""])[0]
            client_id = query.get("client_id", [""])[0]
            if client_id != BOT_APP_ID:
                return self._json(400, {"error": f"no identity {client_id}"})
            expires = int(time.time()) + 3600
            token = world.token(aud=resource, appid=client_id, idtyp="app")
            return self._json(
                200,
                {
                    "access_token": token,
                    "expires_on": str(expires),
                    "resource": resource,
                    "token_type": "Bearer",
                    "client_id": client_id,
                },
            )

        def _graph(self, method: str, path: str) -> None:
            with world.lock:
                world.graph_calls.append(f"{method} {path}")
            if not self._bearer(f"{world.base}/graph"):
                return self._json(401, {"error": "bad token"})
            if method == "GET" and path == f"/v1.0/servicePrincipals(appId='{API_APP_ID}')":
                roles = [{"id": i, "value": v} for v, i in ROLE_IDS.items()]
                return self._json(200, {"id": SP_ID, "appRoles": roles})
            if method == "GET" and path == f"/v1.0/servicePrincipals/{SP_ID}/appRoleAssignedTo":
                value = [{"principalId": p, "appRoleId": ROLE_IDS[r]} for p, r in ASSIGNMENTS]
                return self._json(200, {"value": value})
            parts = path.split("/")
            if len(parts) >= 4 and parts[2] == "users":
                user = USERS.get(parts[3])
                if user is None:
                    return self._json(404, {"error": {"code": "Request_ResourceNotFound"}})
                if method == "GET" and len(parts) == 4:
                    return self._json(200, {"id": user.oid, "userPrincipalName": user.upn})
                if method == "POST" and parts[4:] == ["getMemberObjects"]:
                    self._body()
                    return self._json(200, {"value": GROUPS.get(user.oid, [])})
            return self._json(404, {"error": {"code": "not here"}})

        def _connector(self, method: str, path: str) -> None:
            # /connector/v3/conversations/{conversation}/activities[/{activity}]
            rest = path[len("/connector/v3/conversations/") :]
            conversation, _, tail = rest.partition("/activities")
            activity_id = tail.lstrip("/") or None
            body = self._body()
            token_ok = self._bearer("https://api.botframework.com")
            new_id = (
                activity_id if method == "PUT" and activity_id else f"bot-{uuid.uuid4().hex[:12]}"
            )
            with world.lock:
                world.sent.append(Sent(method, conversation, activity_id, body, token_ok, new_id))
            if not token_ok:
                return self._json(401, {"error": {"code": "Unauthorized"}})
            return self._json(200, {"id": new_id})

    return Handler
