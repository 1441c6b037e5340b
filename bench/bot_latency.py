"""How fast the Teams door answers: Teams gives an outgoing webhook 5 seconds.

Starts a local stack (real Azurite, Cosmos DB server, API; two agents) with a Teams secret,
then sends signed activities the way Teams does, one after another, and times each reply:
``run`` (validate, take or queue for the target lock, write the run, enqueue), ``status``
and ``help``. The runs all go to one target, so all but the first take the waiting path.

Usage: .venv/bin/python bench/bot_latency.py [--requests 30]
Writes bench/out/bot_latency.json and prints a table.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from benchctl import localstack

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
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        stack = localstack.up(
            agents=2,
            targets={"scratch": str(root / "scratch")},
            directory=root / "stack",
            api_env={"BENCH_TEAMS_BOT_SECRET": SECRET_B64},
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
        finally:
            localstack.down(root / "stack")
    result = {k: summary(v) for k, v in figures.items()}
    OUT.mkdir(exist_ok=True)
    (OUT / "bot_latency.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"{'command':<8} {'n':>4} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for k, v in result.items():
        print(f"{k:<8} {v['n']:>4} {v['p50_ms']:>8} {v['p95_ms']:>8} {v['max_ms']:>8}")


if __name__ == "__main__":
    main()
