"""The chat doors against the real stack: the Teams outgoing webhook (signed the way Teams
signs), the generic signed webhook, and the guardrails a chat user meets."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.blob import BlobArtifacts
from adapters.config import Settings
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues, work_queue_name
from benchctl import localstack
from benchctl.localstack import Stack
from core.chat.bot import Bot, parse_command
from core.chat.identity import BOT_DOOR
from core.models import MAX_CLIENTS
from core.monitoring.monitor import Monitor
from core.monitoring.notify import sign
from core.monitoring.scheduler import Scheduler
from core.runs.guardrails import Caller, TargetInfo
from core.runs.service import RunService
from functions.context import result_doors
from tests.conftest import (
    BOT_POOL,
    BOT_SECRET,
    FUZZ_POOL,
    FUZZ_TARGET,
    TEAMS_BOT_SECRET_B64,
    Receiver,
    wait_state,
    wait_until,
)


def teams_activity(text: str, *, when: datetime | None = None, activity_id: str = "") -> bytes:
    """An outgoing-webhook activity as Teams posts it: HTML text with the @mention first."""
    activity = {
        "type": "message",
        "id": activity_id or str(uuid.uuid4()),
        "timestamp": (when or datetime.now(UTC)).isoformat().replace("+00:00", "Z"),
        "serviceUrl": "https://smba.trafficmanager.net/emea/",
        "channelId": "msteams",
        "from": {"id": "29:1abc", "name": "Alice Example", "aadObjectId": "0000-aaaa"},
        "conversation": {"id": "19:chan@thread.skype;messageid=1", "isGroup": True},
        "text": f"<at>Bench</at>&nbsp;{text}",
        "textFormat": "plain",
    }
    return json.dumps(activity).encode()


def teams_auth(body: bytes) -> dict[str, str]:
    """Teams' own computation: HMAC-SHA256 of the raw body with the Base64-decoded secret,
    Base64-encoded, after the word HMAC."""
    key = base64.b64decode(TEAMS_BOT_SECRET_B64)
    mac = base64.b64encode(hmac.new(key, body, hashlib.sha256).digest()).decode()
    return {"Authorization": f"HMAC {mac}", "Content-Type": "application/json"}


def card_text(reply: dict[str, Any]) -> str:
    card = reply["attachments"][0]["content"]
    texts = [b.get("text", "") for b in card["body"]]
    facts = [f"{f['title']}={f['value']}" for b in card["body"] for f in b.get("facts", [])]
    return "\n".join(texts + facts)


def queued(queues: WorkQueues) -> int:
    return queues.approximate_count(work_queue_name(BOT_POOL))


def runs_requested_through(api: httpx.Client, door: str) -> list[dict[str, Any]]:
    runs = api.get("/api/runs", params={"tag": f"door={door}", "limit": 200}).json()["runs"]
    return [r for r in runs if r["pool"] == BOT_POOL]


@pytest.fixture
def bot_agent(stack: Stack, tmp_path: Path) -> Any:
    chat = tmp_path / "chat"
    chat.mkdir()
    p = localstack.start_agent(
        stack, f"bot-{uuid.uuid4().hex[:6]}", pool=BOT_POOL, targets={"chat": str(chat)}
    )
    yield p
    localstack.stop_proc(p, timeout=5)


@pytest.mark.fio
def test_teams_signed_run_gets_a_card_then_a_result_card(
    api: httpx.Client, queues: WorkQueues, teams_receiver: Receiver, bot_agent: Any
) -> None:
    body = teams_activity("run smoke-randread-4k on chat with 1 client for 2s")
    r = api.post("/api/bot/teams", content=body, headers=teams_auth(body))
    assert r.status_code == 200, r.text
    reply = r.json()
    assert reply["type"] == "message"
    assert reply["attachments"][0]["contentType"] == "application/vnd.microsoft.card.adaptive"
    text = card_text(reply)
    assert "queued run r-" in text and "I'll post the result here" in text
    run_id = next(line.split()[2].rstrip(":") for line in text.splitlines() if "queued run" in line)
    # The card opens the run's page, not the API's JSON.
    (action,) = reply["attachments"][0]["content"]["actions"]
    assert action["url"].endswith(f"/ui/runs/{run_id}")
    run = api.get(f"/api/runs/{run_id}").json()
    assert run["requested_by"] == {
        "name": "teams:Alice Example",
        "role": "runner",
        "door": "bot-teams",
    }
    assert run["workload"]["runtime"] == 2 and run["profile"] == "smoke-randread-4k"
    wait_state(api, run_id, ("completed",), timeout=120)

    def result_card() -> Any:
        for _, raw in teams_receiver.posts:
            msg = json.loads(raw)
            if run_id in card_text(msg):
                return msg
        return None

    card = wait_until(result_card, 30, what="the result card")
    assert f"Run {run_id} completed" in card_text(card)
    assert "read IOPS=" in card_text(card)
    time.sleep(1.5)  # further timer ticks announce nothing more
    assert sum(run_id in card_text(json.loads(raw)) for _, raw in teams_receiver.posts) == 1


def test_teams_flipped_byte_is_401_and_nothing_is_enqueued(
    api: httpx.Client, queues: WorkQueues
) -> None:
    before_queue, before_runs = queued(queues), len(runs_requested_through(api, "bot-teams"))
    body = teams_activity("run smoke-randread-4k on chat")
    headers = teams_auth(body)
    flipped = bytearray(body)
    flipped[len(flipped) // 2] ^= 0x01
    r = api.post("/api/bot/teams", content=bytes(flipped), headers=headers)
    assert r.status_code == 401
    assert r.json()["errors"][0]["field"] == "Authorization"
    assert api.post("/api/bot/teams", content=body).status_code == 401  # no signature
    wrong = dict(headers, Authorization="HMAC " + base64.b64encode(b"x" * 32).decode())
    assert api.post("/api/bot/teams", content=body, headers=wrong).status_code == 401
    assert queued(queues) == before_queue
    assert len(runs_requested_through(api, "bot-teams")) == before_runs


def test_teams_replayed_and_stale_activities_are_refused(
    api: httpx.Client, queues: WorkQueues
) -> None:
    body = teams_activity("profiles")
    first = api.post("/api/bot/teams", content=body, headers=teams_auth(body))
    assert first.status_code == 200 and "smoke-randread-4k" in card_text(first.json())
    again = api.post("/api/bot/teams", content=body, headers=teams_auth(body))
    assert again.status_code == 409 and "replay" in again.json()["errors"][0]["message"]

    before = queued(queues)
    old = teams_activity(
        "run smoke-randread-4k on chat", when=datetime.now(UTC) - timedelta(minutes=6)
    )
    stale = api.post("/api/bot/teams", content=old, headers=teams_auth(old))
    assert stale.status_code == 401 and stale.json()["errors"][0]["field"] == "timestamp"
    assert queued(queues) == before


def test_teams_unknown_command_gets_the_help_card(api: httpx.Client) -> None:
    for text in (
        "make coffee",
        "run on",
        "status",
        f"run smoke-randread-4k on chat with {MAX_CLIENTS + 1} clients",
    ):
        body = teams_activity(text)
        r = api.post("/api/bot/teams", content=body, headers=teams_auth(body))
        assert r.status_code == 200
        assert "run <profile> on <target>" in card_text(r.json()), text


def test_bot_guardrails_refuse_writes_on_read_only_targets_and_too_many_clients(
    api: httpx.Client, queues: WorkQueues
) -> None:
    before = queued(queues)
    body = teams_activity("run anf-fio-randwrite-8k on golden for 10s")
    text = card_text(api.post("/api/bot/teams", content=body, headers=teams_auth(body)).json())
    assert "Refused" in text
    assert "target golden is read-only" in text
    assert "role runner may not run write tests" in text
    body = teams_activity("run smoke-randread-4k on chat with 8 clients")
    text = card_text(api.post("/api/bot/teams", content=body, headers=teams_auth(body)).json())
    assert "clients: role runner may use at most 4" in text
    body = teams_activity("run smoke-randread-4k on nowhere")
    text = card_text(api.post("/api/bot/teams", content=body, headers=teams_auth(body)).json())
    assert "no target 'nowhere'" in text
    assert queued(queues) == before


def webhook_post(
    api: httpx.Client, payload: dict[str, Any], *, at: int | None = None
) -> httpx.Response:
    raw = json.dumps(payload).encode()
    headers = sign(raw, secret=BOT_SECRET.encode(), timestamp=at or int(time.time()))
    return api.post(
        "/api/bot/webhook", content=raw, headers={**headers, "Content-Type": "application/json"}
    )


def test_generic_webhook_answers_json_and_refuses_bad_stale_and_replayed(
    api: httpx.Client, queues: WorkQueues
) -> None:
    r = webhook_post(api, {"text": "targets", "user": "ci-bot"})
    assert r.status_code == 200
    reply = r.json()
    assert reply["command"] == "targets" and reply["ok"] is True
    chat = next(t for t in reply["data"]["targets"] if t["alias"] == "chat")
    assert chat["pool"] == BOT_POOL and chat["read_only"] is False
    assert webhook_post(api, {"text": "nonsense"}).json()["command"] == "help"

    before = queued(queues)
    raw = json.dumps({"text": "run smoke-randread-4k on chat"}).encode()
    headers = sign(raw, secret=BOT_SECRET.encode(), timestamp=int(time.time()))
    tampered = raw.replace(b"chat", b"chaT")
    assert api.post("/api/bot/webhook", content=tampered, headers=headers).status_code == 401
    stale = webhook_post(api, {"text": "run smoke-randread-4k on chat"}, at=int(time.time()) - 301)
    assert stale.status_code == 401
    assert queued(queues) == before

    ok = api.post("/api/bot/webhook", content=raw, headers=headers)
    assert ok.status_code == 200 and ok.json()["command"] == "run", ok.text
    run_id = ok.json()["data"]["run_id"]
    replay = api.post("/api/bot/webhook", content=raw, headers=headers)
    assert replay.status_code == 409
    status = webhook_post(api, {"text": f"status {run_id}"}).json()
    assert status["data"]["run_id"] == run_id
    run = api.get(f"/api/runs/{run_id}").json()
    assert run["requested_by"]["door"] == "bot-webhook"
    assert run["requested_by"]["name"] == "webhook:unknown"
    api.delete(f"/api/runs/{run_id}")  # nobody serves it here


def test_without_a_result_channel_the_bot_says_so_and_links_the_runs_page(
    stack: Stack, store: CosmosStore, queues: WorkQueues, artifacts: BlobArtifacts
) -> None:
    """A door whose result webhook is not configured: the bot does not promise a result
    card, it says where to follow the run; every link is the run's page."""
    service = RunService(
        store,
        queues,
        artifacts,
        pools=tuple(stack.pool_names),
        pool_configs=stack.settings().pool_configs,
    )
    target = TargetInfo(alias=FUZZ_TARGET, pool=FUZZ_POOL)  # no agent: it only queues
    public = "https://bench.example"
    for doors, promised in ((frozenset(), False), (frozenset({"bot-webhook"}), True)):
        bot = Bot(
            service,
            Scheduler(store, service),
            Monitor(store),
            targets=[target],
            public_url=public,
            result_doors=doors,
        )
        caller = Caller(name="webhook:ada", role="runner", door="bot-webhook")
        reply = bot.answer(
            parse_command(f"run smoke-randread-4k on {FUZZ_TARGET}"), caller, uuid.uuid4().hex
        )
        run_id = str(reply.data["run_id"])
        text = " ".join(reply.lines)
        assert ("I'll post the result here" in text) == promised, text
        if not promised:
            assert "no result channel is configured" in text
            assert f"follow it at {public}/ui/runs/{run_id}" in text
            assert f"status {run_id}" in text
        assert reply.link == f"{public}/ui/runs/{run_id}"
        status = bot.answer(parse_command(f"status {run_id}"), caller, uuid.uuid4().hex)
        assert status.link == f"{public}/ui/runs/{run_id}"
        service.cancel(run_id)


def test_the_bot_promises_a_result_only_where_the_settings_give_it_a_channel() -> None:
    """Each chat door's result channel: Teams' Workflows webhook, the generic webhook with
    its signing secret, and the Teams bot (bot-m365), which posts into the conversation the
    run came from wherever the bot is configured."""
    base = {
        "BENCH_QUEUE_URI": "https://q.queue.core.windows.net/",
        "BENCH_BLOB_URI": "https://b.blob.core.windows.net",
        "BENCH_COSMOS_ENDPOINT": "https://c.documents.azure.com:443/",
    }
    assert result_doors(Settings.from_env(base)) == frozenset()
    workflows = "https://prod-12.westeurope.logic.azure.com:443/workflows/0a1b/triggers/manual"
    unsigned = {**base, "BENCH_WEBHOOK_URL": "https://hooks.example/x"}
    assert result_doors(Settings.from_env(unsigned)) == frozenset()  # its posts are signed
    every = {
        **unsigned,
        "BENCH_WEBHOOK_SECRET": "s3cret",
        "BENCH_TEAMS_WEBHOOK_URL": workflows,
        "BENCH_BOT_APP_ID": "00000000-0000-0000-0000-0000000000b0",
        "BENCH_BOT_TENANT_ID": "00000000-0000-0000-0000-0000000000a1",
    }
    assert result_doors(Settings.from_env(every)) == {"bot-teams", "bot-webhook", BOT_DOOR}
