"""Entra ID tokens through the shared API transport (apiclient): azure-core's
BearerTokenCredentialPolicy keeps the token, so many calls (a `benchctl run --wait`, an agent
at its barrier) ask the credential once, and again only when the token nears its expiry.
The credential is a TokenCredential that counts its calls; the API is a loopback server that
records each request's Authorization header."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.core.pipeline.policies import _authentication

from agent.api_client import ApiClient
from benchctl.client import Api, CliError, Connection
from core.models import WorkItem, Workload
from tests.loopback import Quiet, serve

SCOPE = "api://bench/.default"
ITEM = WorkItem(
    run_id="r-" + "b" * 32,
    item_id="r-" + "b" * 32 + ".s0.c0",
    step=0,
    client=0,
    clients=1,
    pool="default",
    targets=["scratch"],
    engine="fio",
    workload=Workload(),
)


class Clock:
    """Wall-clock time plus an offset the test moves forward (tokens last an hour)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def time(self) -> float:
        return time.time() + self.offset


class CountingCredential:
    """azure.core's TokenCredential protocol: a new token per call, valid for an hour."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes.append(scopes)
        return AccessToken(f"token-{len(self.scopes)}", int(self.clock.time()) + 3600)


class Recorder:
    def __init__(self) -> None:
        self.auth: list[str | None] = []
        seen = self.auth

        class Handler(Quiet):
            def reply(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                seen.append(self.headers.get("Authorization"))
                body = json.dumps({"id": "r-1", "state": "running", "status": "wait"}).encode()
                self.send_body(200, body, "application/json")

            do_GET = do_POST = reply

        self.server, self.url = serve(Handler)


@pytest.fixture
def api_server() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.server.shutdown()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    # The policy reads time.time() to judge expiry; it is the clock the test moves.
    monkeypatch.setattr(_authentication, "time", c)
    return c


def test_the_cli_asks_for_a_token_once_while_it_is_valid(
    api_server: Recorder, clock: Clock
) -> None:
    credential = CountingCredential(clock)
    api = Api(Connection(api_server.url, scope=SCOPE), credential=credential)
    for _ in range(50):  # `run --wait` reads the run once a second
        assert api.get("r-1")["state"] == "running"
    assert credential.scopes == [(SCOPE,)]
    assert api_server.auth == ["Bearer token-1"] * 50

    clock.offset = 3600 - 200  # within the policy's 5-minute refresh window
    for _ in range(10):
        api.get("r-1")
    assert len(credential.scopes) == 2  # one new token, then kept again
    assert api_server.auth[50:] == ["Bearer token-2"] * 10
    api.close()


def test_the_agent_asks_for_a_token_once_at_its_barrier(api_server: Recorder, clock: Clock) -> None:
    credential = CountingCredential(clock)
    client = ApiClient(api_server.url, credential=credential, scope=SCOPE)
    for _ in range(50):  # the barrier is polled 4 times a second
        assert client.barrier(ITEM, "vm1").status == "wait"
    assert len(credential.scopes) == 1
    assert set(api_server.auth) == {"Bearer token-1"}
    client.close()


def test_a_token_goes_only_over_https_or_to_loopback(clock: Clock) -> None:
    credential = CountingCredential(clock)
    with pytest.raises(CliError, match="only over https") as refused:
        Api(Connection("http://bench.example.com", scope=SCOPE), credential=credential)
    assert refused.value.code == 2
    with pytest.raises(ValueError, match="only over https"):
        ApiClient("http://bench.example.com", credential=credential, scope=SCOPE)
    # Without a scope nothing is signed, and plain http stays allowed (an API key, locally).
    Api(Connection("http://bench.example.com"), credential=credential).close()
    assert credential.scopes == []
