"""How fast the chat doors answer: Teams gives an outgoing webhook 5 seconds, and a bot 5
seconds for a card's invoke (msteams-docs, "Respond to the dialog submit action").

Starts a local stack (real Azurite, Cosmos DB server, API; two agents) with a Teams secret
and the Teams bot trusting a token issuer on loopback (tests/bot_world.py: issuer, managed
identity endpoint, Graph and Bot Connector), then, one request after another:

- the outgoing webhook: signed activities as Teams sends them, ``run`` (validate, take or
  queue for the target lock, write the run, enqueue), ``status`` and ``help``;
- the Teams bot (/api/messages): activities with the channel's token; each time covers the
  token's check, the role lookup (Graph, cached), the SDK's turn and the reply's round trip
  to the Bot Connector (the SDK answers 202 once the reply is delivered): ``run`` (plus
  storing the conversation), ``status``, ``help``, and a card's ``refresh`` (an invoke: the
  card comes back in the answer).

The runs all go to one target, so all but the first take the waiting path.

Usage: .venv/bin/python bench/bot_latency.py [--requests 30]
Writes bench/out/bot_latency.json and prints a table.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import signal
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from benchctl import localstack
from tests.bot_world import World, press
from tests.bot_world import activity as bot_activity

SECRET_B64 = base64.b64encode(b"bench-bot-latency-secret-32-byte").decode()
OUT = Path(__file__).parent / "out"


def activity(text: str) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(
        {
            "type": "message",
            "id": str(uuid.uuid4()),
            "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "from": {"name": "bench"},
            "text": f"<at>Bench</at> {text}",
        }
    ).encode()
    mac = hmac.new(base64.b64decode(SECRET_B64), body, hashlib.sha256).digest()
    return body, {"Authorization": "HMAC " + base64.b64encode(mac).decode()}


def timed(api: httpx.Client, text: str) -> tuple[float, dict[str, Any]]:
    body, headers = activity(text)
    t0 = time.perf_counter()
    r = api.post("/api/bot/teams", content=body, headers=headers)
    elapsed = (time.perf_counter() - t0) * 1000
    r.raise_for_status()
    reply: dict[str, Any] = r.json()
    return elapsed, reply


def bot_timed(api: httpx.Client, world: World, act: dict[str, Any]) -> tuple[float, Any]:
    headers = {"Authorization": f"Bearer {world.token()}"}
    t0 = time.perf_counter()
    r = api.post("/api/messages", json=act, headers=headers)
    elapsed = (time.perf_counter() - t0) * 1000
    r.raise_for_status()
    return elapsed, r.json()


def bot_figures(api: httpx.Client, world: World, n: int) -> dict[str, list[float]]:
    conv = f"a:bench-{uuid.uuid4().hex[:8]}"

    def say(text: str) -> tuple[float, Any]:
        return bot_timed(api, world, bot_activity(world, text=text, conversation=conv))

    say("help")  # first turn: the SDK's and Graph's caches
    figures: dict[str, list[float]] = {"run": [], "status": [], "help": [], "refresh": []}
    run_ids = []
    for _ in range(n):
        before = len(world.sent_to(conv))
        figures["run"].append(say("run smoke-randread-4k on scratch for 2s")[0])
        head = world.sent_to(conv)[before].card()["body"][0]["text"]
        run_ids.append(head.split()[1].rstrip(":"))
    for run_id in run_ids:
        figures["status"].append(say(f"status {run_id}")[0])
        figures["refresh"].append(bot_timed(api, world, press(world, "refresh", run_id=run_id))[0])
    for _ in range(n):
        figures["help"].append(say("help")[0])
    for run_id in run_ids:
        api.delete(f"/api/runs/{run_id}")
    return figures


def summary(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {
        "n": len(ms),
        "p50_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 1),
        "max_ms": round(ordered[-1], 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=30)
    a = ap.parse_args()
    world = World().start()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        stack = localstack.up(
            agents=2,
            targets={"scratch": str(root / "scratch")},
            directory=root / "stack",
            api_env={"BENCH_TEAMS_BOT_SECRET": SECRET_B64, **world.env()},
        )
        try:
            with httpx.Client(base_url=stack.api_url, timeout=30) as api:
                timed(api, "help")  # first request: connections and imports
                figures: dict[str, list[float]] = {"run": [], "status": [], "help": []}
                run_ids = []
                for _ in range(a.requests):
                    ms, reply = timed(api, "run smoke-randread-4k on scratch for 2s")
                    figures["run"].append(ms)
                    text = json.dumps(reply)
                    run_ids.append(text.split("queued run ")[1].split(":")[0])
                for run_id in run_ids[: a.requests]:
                    figures["status"].append(timed(api, f"status {run_id}")[0])
                for _ in range(a.requests):
                    figures["help"].append(timed(api, "help")[0])
                for run_id in run_ids:
                    api.delete(f"/api/runs/{run_id}")
                bot = bot_figures(api, world, a.requests)
        finally:
            localstack.down(root / "stack")
            world.stop()
    result = {
        "outgoing_webhook": {k: summary(v) for k, v in figures.items()},
        "teams_bot": {k: summary(v) for k, v in bot.items()},
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "bot_latency.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'door':<17} {'command':<8} {'n':>4} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for door, rows in result.items():
        for k, v in rows.items():
            print(
                f"{door:<17} {k:<8} {v['n']:>4} {v['p50_ms']:>8} {v['p95_ms']:>8} {v['max_ms']:>8}"
            )


if __name__ == "__main__":
    # Stopped with SIGTERM, as with Ctrl-C: its ``finally`` stops the stack it started.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    main()
