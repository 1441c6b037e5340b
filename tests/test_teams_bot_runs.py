"""The Teams bot's runs end to end: a run asked for in a channel runs through the real stack
(queue, agent, fio), its card is updated in place as it moves and its result card is posted
back to the channel; each card action (form, run, refresh, cancel, rerun, compare with the
series' baseline, subscribe) and who may press it; regressions to subscribed conversations."""

from __future__ import annotations

import importlib.util
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchctl import localstack
from benchctl.localstack import Stack
from core.chat.cards import gate_text
from core.chat.threads import ChatNotifier, Threads
from core.latency import format_ns
from core.models.regression import DeliveryRecord, MeanStd, Regression
from core.ports import NoNotifier
from tests.bot_world import ALICE, BOB, CAROL, DAVE, World, activity, press
from tests.conftest import BOT_POOL, wait_state, wait_until
from tests.test_teams_bot import post, say, verbs, words


def _renderer() -> Any:
    spec = importlib.util.spec_from_file_location(
        "card_screenshot", Path(__file__).parent.parent / "scripts" / "card_screenshot.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["card_screenshot"] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


_cards = _renderer()
render, render_all = _cards.render, _cards.render_all


@pytest.fixture
def chat_agent(stack: Stack, tmp_path: Path) -> Any:
    chat = tmp_path / "chat"
    chat.mkdir()
    p = localstack.start_agent(
        stack, f"teams-{uuid.uuid4().hex[:6]}", pool=BOT_POOL, targets={"chat": str(chat)}
    )
    yield p
    localstack.stop_proc(p, timeout=5)


def run_id_of(card: dict[str, Any]) -> str:
    head = str(card["body"][0]["text"])  # "Run r-...: queued"
    assert head.startswith("Run r-"), head
    return head.split()[1].rstrip(":")


def act(api: httpx.Client, world: World, invoke: dict[str, Any]) -> dict[str, Any]:
    """Press a button: the card Teams puts in its place (the invoke's answer)."""
    r = post(api, world, invoke)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["statusCode"] == 200
    assert answer["type"] == "application/vnd.microsoft.card.adaptive"
    card: dict[str, Any] = answer["value"]
    return card


@pytest.mark.fio
@pytest.mark.browser
def test_a_run_from_a_channel_moves_in_place_and_its_result_comes_back_there(
    api: httpx.Client, bot_world: World, chat_agent: Any, tmp_path: Path
) -> None:
    conv = f"19:bench-{uuid.uuid4().hex[:6]}@thread.tacv2;messageid=1700000000001"
    reply = say(
        api, bot_world, "run smoke-randread-4k on chat for 2s", conversation=conv, kind="channel"
    )
    card = reply.card()
    run_id = run_id_of(card)
    assert "cancel" in verbs(card) and card["refresh"]["action"]["verb"] == "refresh"
    run = api.get(f"/api/runs/{run_id}").json()
    # Alice's name as the REST API knows her (her UPN, from Graph), and her role.
    assert run["requested_by"] == {"name": ALICE.upn, "role": "runner", "door": "bot-m365"}
    done = wait_state(api, run_id, ("completed",), timeout=120)

    def result() -> Any:
        posts = [s for s in bot_world.sent_to(conv) if s.method == "POST" and s is not reply]
        return posts[0] if posts else None

    posted = wait_until(result, 30, what="the result card")
    assert posted.token_ok and posted.activity_id == reply.activity_id  # a reply to the request
    text = words(posted.card())
    assert f"Run {run_id}: completed" in text
    agg = done["aggregate"]
    assert f"{float(agg['read']['iops']):,.1f}" in text  # the run view's own figure
    # Total latency, named, in the unit that fits it (core.latency), as the run view has it.
    assert f"read total p99\n{format_ns(float(agg['read']['lat_ns']['p99']))}" in text
    # The gate's verdict, as the finalized run's view carries it (GET /api/runs/{id}).
    gate = api.get(f"/api/runs/{run_id}").json()["gate"]
    assert gate is not None and f"Gate\n{gate_text(gate)}" in text
    assert set(verbs(posted.card())) == {"rerun", "compare"}
    report = [a for a in posted.card()["actions"] if a["type"] == "Action.OpenUrl"]
    assert report[0]["url"].endswith(f"/ui/runs/{run_id}")
    # The first card was updated in place (same message id), at the latest to completed.
    updates = [s for s in bot_world.sent_to(conv) if s.method == "PUT"]
    assert updates and all(u.activity_id == reply.new_id for u in updates)
    assert f"Run {run_id}: completed" in words(updates[-1].card())
    assert all(u.token_ok for u in updates)
    # Announced once: later timer ticks post nothing more.
    count = len(bot_world.sent_to(conv))
    time.sleep(1.5)
    assert len(bot_world.sent_to(conv)) == count

    # Compare with the series' baseline, as a reader may (a GET).
    baseline = act(api, bot_world, press(bot_world, "compare", user=DAVE, run_id=run_id))
    assert f"Run {run_id} against its series' baseline" in words(baseline)
    assert "refresh" in verbs(baseline)

    # As Microsoft's Adaptive Cards renderer draws them in Chromium: no complaint about the
    # JSON, the figures and the buttons a person sees.
    shown, first, compared = render_all(
        [
            (posted.card(), tmp_path / "result.png"),
            (card, tmp_path / "queued.png"),
            (baseline, tmp_path / "baseline.png"),
        ]
    )
    assert shown.complaints == []
    assert f"Run {run_id}: completed" in shown.text
    assert f"{float(agg['read']['iops']):,.1f}" in shown.text and "read total p99" in shown.text
    bound = agg["bound_by"]  # what bound it: the nearest declared limit, as the view says
    assert f"{bound['name']} ({bound['utilisation']:.0%})" in shown.text
    assert shown.buttons == ["Rerun", "Compare with baseline", "Open report"]
    assert first.complaints == [] and first.buttons == ["Cancel", "Open report"]
    assert compared.complaints == [] and "Subscribe to its regressions" in compared.buttons


@pytest.mark.browser
def test_each_card_action_is_authorised_like_its_rest_call(
    api: httpx.Client, bot_world: World, tmp_path: Path
) -> None:
    # The form: profiles and targets to choose from.
    form = act(api, bot_world, press(bot_world, "form"))
    choices = {
        i["id"]: [c["value"] for c in i.get("choices", [])] for i in form["body"] if "id" in i
    }
    assert "smoke-randread-4k" in choices["profile"] and "chat" in choices["target"]
    assert verbs(form) == ["run"]
    drawn = render(form, tmp_path / "form.png")
    assert drawn.complaints == [] and drawn.buttons == ["Run"]

    # Run from the form (as POST /api/runs): Bob, an engineer through his group.
    card_id = f"card-{uuid.uuid4().hex[:8]}"
    data = {"profile": "smoke-randread-4k", "target": "chat", "clients": "1", "runtime": "30"}
    card = act(api, bot_world, press(bot_world, "run", user=BOB, card_id=card_id, **data))
    bobs = run_id_of(card)
    run = api.get(f"/api/runs/{bobs}").json()
    assert run["requested_by"] == {"name": BOB.upn, "role": "engineer", "door": "bot-m365"}
    assert run["workload"]["runtime"] == 30 and run["pool"] == BOT_POOL
    # Not without a role: nothing is started.
    refused = act(api, bot_world, press(bot_world, "run", user=CAROL, **data))
    assert "Sorry Carol" in words(refused) and "Bench.Runner" in words(refused)
    listed = api.get("/api/runs", params={"tag": "door=bot-m365", "limit": 200}).json()["runs"]
    assert not [r for r in listed if r["requested_by"]["name"] == CAROL.upn]
    # A form that does not parse comes back with what was wrong.
    bad = act(api, bot_world, press(bot_world, "run", profile="smoke-randread-4k", target=""))
    assert verbs(bad) == ["run"] and "Start a run" in words(bad)

    # Refresh (as GET /api/runs/{id}): anyone with a role.
    card = act(api, bot_world, press(bot_world, "refresh", user=DAVE, run_id=bobs))
    assert run_id_of(card) == bobs
    assert "Bench.Reader" in words(
        act(api, bot_world, press(bot_world, "refresh", user=CAROL, run_id=bobs))
    )

    # Cancel (as DELETE /api/runs/{id}): not a reader, not a runner on Bob's run.
    text = words(act(api, bot_world, press(bot_world, "cancel", user=DAVE, run_id=bobs)))
    assert "needs the Bench.Runner app role" in text
    text = words(act(api, bot_world, press(bot_world, "cancel", user=ALICE, run_id=bobs)))
    assert "role runner may change only its own" in text and BOB.upn in text
    assert api.get(f"/api/runs/{bobs}").json()["cancel_requested"] is False
    card = act(api, bot_world, press(bot_world, "cancel", user=BOB, run_id=bobs))
    assert "cancel requested" in words(card)
    assert api.get(f"/api/runs/{bobs}").json()["cancel_requested"] is True
    wait_state(api, bobs, ("cancelled",), timeout=30)

    # Rerun (as POST /api/runs with the run's request): Alice may, under her own limits.
    text = words(act(api, bot_world, press(bot_world, "rerun", user=CAROL, run_id=bobs)))
    assert "Sorry Carol" in text and "Bench.Runner" in text
    card = act(api, bot_world, press(bot_world, "rerun", user=ALICE, run_id=bobs))
    again = run_id_of(card)
    assert again != bobs
    rerun = api.get(f"/api/runs/{again}").json()
    assert rerun["requested_by"]["name"] == ALICE.upn
    assert rerun["request"]["profile"] == "smoke-randread-4k" and rerun["workload"]["runtime"] == 30
    # Her own run: she may cancel it.
    assert "cancel requested" in words(
        act(api, bot_world, press(bot_world, "cancel", run_id=again))
    )

    # Compare (a GET): not without a role; unknown runs are said to be unknown.
    assert "Bench.Reader" in words(
        act(api, bot_world, press(bot_world, "compare", user=CAROL, run_id=bobs))
    )
    assert (
        "not found"
        in words(act(api, bot_world, press(bot_world, "compare", run_id="r-" + "0" * 32))).lower()
    )


def test_cancel_and_status_commands(api: httpx.Client, bot_world: World) -> None:
    conv = f"19:group-{uuid.uuid4().hex[:6]}@thread.v2"
    card = say(
        api, bot_world, "run smoke-randread-4k on chat for 60s", conversation=conv, kind="groupChat"
    ).card()
    run_id = run_id_of(card)
    status = say(api, bot_world, f"status {run_id}", user=DAVE, conversation=conv, kind="groupChat")
    assert run_id_of(status.card()) == run_id and "cancel" in verbs(status.card())
    refused = say(
        api, bot_world, f"cancel {run_id}", user=DAVE, conversation=conv, kind="groupChat"
    )
    assert "needs the Bench.Runner app role" in words(refused.card())
    done = say(api, bot_world, f"cancel {run_id}", conversation=conv, kind="groupChat")
    assert "cancel requested" in words(done.card())
    assert api.get(f"/api/runs/{run_id}").json()["cancel_requested"] is True
    compare = say(
        api, bot_world, f"compare {run_id} {run_id}", user=DAVE, conversation=conv, kind="groupChat"
    )
    assert "no aggregate" in words(compare.card())  # as GET /api/compare says


def test_regressions_go_to_the_conversations_subscribed_to_the_series(
    api: httpx.Client, bot_world: World, stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = uuid.uuid4().hex[:16]
    conv = f"19:subs-{uuid.uuid4().hex[:6]}@thread.tacv2"
    other = f"19:other-{uuid.uuid4().hex[:6]}@thread.tacv2"
    assert "Bench.Reader" in words(
        say(
            api, bot_world, f"subscribe {key}", user=CAROL, conversation=conv, kind="channel"
        ).card()
    )
    assert "Subscribed" in words(
        say(api, bot_world, f"subscribe {key}", user=DAVE, conversation=conv, kind="channel").card()
    )
    sub = act(
        api,
        bot_world,
        {
            **press(bot_world, "subscribe", user=DAVE, series=key),
            "conversation": {"id": other, "conversationType": "channel", "isGroup": True},
        },
    )
    assert verbs(sub) == ["unsubscribe"]
    act(
        api,
        bot_world,
        {
            **press(bot_world, "unsubscribe", user=DAVE, series=key),
            "conversation": {"id": other, "conversationType": "channel", "isGroup": True},
        },
    )

    # The service's notifier, as the detection timer calls it when it stores a regression.
    monkeypatch.setenv("IDENTITY_ENDPOINT", bot_world.env()["IDENTITY_ENDPOINT"])
    monkeypatch.setenv("IDENTITY_HEADER", bot_world.env()["IDENTITY_HEADER"])
    from adapters.bot_connector import BotConnector
    from adapters.cosmos import CosmosStore
    from adapters.cosmos.conversations import CosmosConversations
    from tests.bot_world import BOT_APP_ID, TENANT_ID
    from tests.documents import run_view

    store = CosmosStore.from_settings(stack.settings())
    issuers = {bot_world.issuer: f"{bot_world.issuer}/.well-known/openid-configuration"}
    threads = Threads(
        CosmosConversations(store.container("conversations")),
        BotConnector(BOT_APP_ID, TENANT_ID, issuers, local=True),
        lambda run_id: run_view(id=run_id),  # not asked: a regression names no run
        public_url=stack.api_url,
    )
    regression = Regression(
        id=f"{key}.read.iops.gate.r-x",
        series_key=key,
        target="chat",
        metric="read.iops",
        kind="regression",
        method="gate",
        change_pct=-31.5,
        before=MeanStd(mean=1000.0, std=10.0),
        after=MeanStd(mean=685.0, std=0.0),
        first_run_id="r-x",
        first_time_ms=0,
    )
    before = len(bot_world.sent_to(conv))
    records = ChatNotifier(NoNotifier(), lambda: threads).notify(regression)
    assert records == [DeliveryRecord(channel="teams-bot", ok=True, error=None)]
    posted = bot_world.sent_to(conv)[before:]
    assert len(posted) == 1 and posted[0].token_ok
    assert "read.iops" in words(posted[0].card()) and "-31.5%" in words(posted[0].card())
    assert not [
        s for s in bot_world.sent_to(other) if s.method == "POST" and "read.iops" in words(s.card())
    ]


def test_the_bot_arriving_in_a_chat_says_what_it_can_do(
    api: httpx.Client, bot_world: World
) -> None:
    conv = f"a:welcome-{uuid.uuid4().hex[:6]}"
    added = activity(bot_world, conversation=conv, type_="conversationUpdate")
    added["membersAdded"] = [{"id": added["recipient"]["id"], "name": "Bench"}]
    assert post(api, bot_world, added).status_code == 202
    sent = bot_world.sent_to(conv)
    assert len(sent) == 1 and "run <profile> on <target>" in words(sent[0].card())
