"""The Teams bot (/api/messages, Microsoft 365 Agents SDK) against the real stack: signed
activities from a test issuer whose OpenID configuration and keys are served on loopback,
replies and card updates recorded by a Bot Connector on loopback (tests/bot_world.py).

Commands in a personal chat, a group chat and a channel; who may do what (Entra app roles
read from Graph); refused tokens; a replayed activity."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from adapters.queue import WorkQueues, work_queue_name
from tests.bot_world import (
    ALICE,
    BOB,
    BOT_APP_ID,
    CAROL,
    DAVE,
    Sent,
    User,
    World,
    activity,
)
from tests.conftest import BOT_POOL


def post(
    api: httpx.Client, world: World, act: dict[str, Any], token: str | None = None
) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    bearer = world.token() if token is None else token
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    return api.post("/api/messages", content=json.dumps(act), headers=headers)


def say(
    api: httpx.Client,
    world: World,
    text: str,
    *,
    user: User = ALICE,
    conversation: str | None = None,
    kind: str = "personal",
) -> Sent:
    """Send a message; the bot's one reply, as the connector received it."""
    conv = conversation or f"a:{kind}-{uuid.uuid4().hex[:8]}"
    act = activity(world, text=text, user=user, conversation=conv, kind=kind)
    before = len(world.sent_to(conv))
    r = post(api, world, act)
    assert r.status_code == 202, r.text
    # Its replies (a run card's update in place may come in between).
    replies = [s for s in world.sent_to(conv)[before:] if s.method == "POST"]
    assert len(replies) == 1, replies
    reply = replies[0]
    assert reply.activity_id == act["id"]  # a reply to the message
    assert reply.token_ok  # the bot's own token, from its managed identity
    return reply


def words(card: dict[str, Any]) -> str:
    """What a person reads on a card: its texts, facts, choices and buttons."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k in ("text", "title", "value", "label"):
                if isinstance(node.get(k), str):
                    out.append(node[k])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk({k: v for k, v in card.items() if k != "refresh"})
    return "\n".join(out)


def verbs(card: dict[str, Any]) -> list[str]:
    return [a["verb"] for a in card.get("actions", []) if a["type"] == "Action.Execute"]


def queued(queues: WorkQueues) -> int:
    return queues.approximate_count(work_queue_name(BOT_POOL))


@pytest.mark.parametrize(
    ("kind", "conversation"),
    [
        ("personal", "a:1personal"),
        ("groupChat", "19:group-chat@thread.v2"),
        ("channel", "19:bench@thread.tacv2;messageid=1700000000000"),
    ],
)
def test_help_profiles_and_targets_in_every_kind_of_conversation(
    api: httpx.Client, bot_world: World, kind: str, conversation: str
) -> None:
    conv = f"{conversation}-{uuid.uuid4().hex[:6]}"
    help_ = say(api, bot_world, "help", conversation=conv, kind=kind).card()
    assert help_["type"] == "AdaptiveCard" and help_["version"] == "1.4"
    assert "run <profile> on <target>" in words(help_)
    assert "cancel <run>" in words(help_)
    assert "form" in verbs(help_)  # "Start a run…" opens the form
    profiles = say(api, bot_world, "profiles", conversation=conv, kind=kind).card()
    assert "smoke-randread-4k" in words(profiles)
    targets = say(api, bot_world, "targets", conversation=conv, kind=kind).card()
    assert "chat" in words(targets) and "golden" in words(targets)
    schedules = say(api, bot_world, "schedules", conversation=conv, kind=kind).card()
    assert schedules["body"][0]["text"] == "Schedules"


def test_a_user_without_a_role_is_refused_politely_with_the_role_to_ask_for(
    api: httpx.Client, bot_world: World, queues: WorkQueues
) -> None:
    before = queued(queues)
    card = say(api, bot_world, "run smoke-randread-4k on chat", user=CAROL).card()
    text = words(card)
    assert "Sorry Carol" in text and "Bench.Runner" in text and "no role" in text
    card = say(api, bot_world, "profiles", user=CAROL).card()
    assert "Bench.Reader" in words(card)
    # A reader may read but not run or cancel: told which role to ask for.
    card = say(api, bot_world, "run smoke-randread-4k on chat", user=DAVE).card()
    assert "needs the Bench.Runner app role and you have Bench.Reader" in words(card)
    assert "smoke-randread-4k" in words(say(api, bot_world, "profiles", user=DAVE).card())
    assert queued(queues) == before


def test_guardrails_are_the_apis_and_name_the_next_role(
    api: httpx.Client, bot_world: World, queues: WorkQueues
) -> None:
    before = queued(queues)
    text = words(say(api, bot_world, "run anf-fio-randwrite-8k on golden for 10s").card())
    assert "target golden is read-only" in text
    assert "role runner may not run write tests" in text
    assert "Bench.Engineer" in text
    text = words(say(api, bot_world, "run smoke-randread-4k on chat with 8 clients").card())
    assert "clients: role runner may use at most 4" in text
    assert queued(queues) == before


@pytest.mark.parametrize(
    "token",
    [
        "",  # unsigned: no token at all
        "not-a-jwt",
        "wrong-key",
        "expired",
        "other-audience",
        "other-issuer",
        "other-service-url",
    ],
)
def test_a_refused_token_does_nothing(
    api: httpx.Client, bot_world: World, queues: WorkQueues, token: str
) -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    forged = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    tokens = {
        "": "",
        "not-a-jwt": "not-a-jwt",
        "wrong-key": bot_world.token(key=forged),  # same kid, another key
        "expired": bot_world.token(lifetime_s=-600),  # past the SDK's 5 min leeway
        "other-audience": bot_world.token(aud="another-bot"),
        "other-issuer": bot_world.token(issuer="https://evil.example/"),
        "other-service-url": bot_world.token(service_url="https://evil.example/connector/"),
    }
    conv = f"a:refused-{uuid.uuid4().hex[:8]}"
    before = queued(queues)
    act = activity(bot_world, text="run smoke-randread-4k on chat", conversation=conv)
    r = post(api, bot_world, act, token=tokens[token])
    assert r.status_code == 401, r.text
    assert r.json()["errors"][0]["field"] in ("Authorization", "serviceUrl")
    assert bot_world.sent_to(conv) == []
    assert queued(queues) == before
    # The same activity, properly signed, is then handled (nothing was recorded as seen).
    assert post(api, bot_world, act).status_code == 202
    api.delete(f"/api/runs/{_run_id(bot_world.sent_to(conv)[0].card())}")


def test_a_replayed_activity_is_refused_and_starts_nothing(
    api: httpx.Client, bot_world: World, queues: WorkQueues
) -> None:
    conv = f"a:replay-{uuid.uuid4().hex[:8]}"
    act = activity(bot_world, text="run smoke-randread-4k on chat for 2s", conversation=conv)
    first = post(api, bot_world, act)
    assert first.status_code == 202
    run_id = _run_id(bot_world.sent_to(conv)[0].card())
    before = queued(queues)
    again = post(api, bot_world, act)  # the same activity, with a fresh valid token
    assert again.status_code == 409 and "replay" in again.json()["errors"][0]["message"]
    assert len(bot_world.sent_to(conv)) == 1
    assert queued(queues) == before
    api.delete(f"/api/runs/{run_id}")


def test_not_configured_activity_fields_are_refused(api: httpx.Client, bot_world: World) -> None:
    act = activity(bot_world, text="help")
    del act["conversation"]
    r = post(api, bot_world, act)
    assert r.status_code == 400


def _run_id(card: dict[str, Any]) -> str:
    head = card["body"][0]["text"]  # "Run r-...: queued"
    assert head.startswith("Run r-"), head
    return str(head.split()[1].rstrip(":"))


__all__ = ["BOB", "BOT_APP_ID"]
