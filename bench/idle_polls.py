"""Queue requests an idle agent makes per hour (issue 17, point 8).

Runs the agent's own loop (agent.worker.Worker) against Azurite's queue with nothing to
do, for ``--seconds``, counting every receive it sends; with the default configuration and
with ``--idle-max 15`` for comparison. The steady rate is one request per ``idle_max_s``:
the count checks it (3,600 / idle_max_s per hour, plus the few of the backoff's ramp).
Usage: .venv/bin/python bench/idle_polls.py [--seconds 60] Writes bench/out/idle_polls.json.
"""

from __future__ import annotations

import argparse
import json
import signal
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from adapters.queue import Message, WorkQueues
from agent.api_client import ApiClient
from agent.config import AgentConfig, MountSpec
from agent.worker import Worker
from benchctl import localstack
from benchctl.localstack import Stack

OUT = Path(__file__).parent / "out"


class CountingQueues(WorkQueues):
    receives = 0

    def receive(self, pool: str, visibility_timeout: int) -> Message | None:
        self.receives += 1
        return super().receive(pool, visibility_timeout)


def idle_count(stack: Stack, config: AgentConfig, seconds: float) -> int:
    settings = stack.settings()
    base = WorkQueues.from_settings(settings)
    queues = CountingQueues(base._service)
    worker = Worker(config, queues, ApiClient(stack.api_url))
    timer = threading.Timer(seconds, worker.request_stop)
    timer.start()
    worker.work()
    return queues.receives


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--out", type=Path, default=OUT / "idle_polls.json")
    a = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="idle-polls-"))
    stack = Stack(
        dir=str(root),
        queue_port=localstack.free_port(),
        cosmos_port=localstack.free_port(),
        api_port=localstack.free_port(),
        blob_port=localstack.free_port(),
    )
    stack.save()
    localstack.start_emulators(stack)
    scratch = root / "scratch"
    scratch.mkdir()
    config = AgentConfig(
        api_url=stack.api_url,
        queue_uri=stack.queue_uri,
        mounts={"scratch": MountSpec.parse("scratch", str(scratch))},
        local_emulators=True,
        agent_id="idle",
    )
    rows: list[dict[str, Any]] = []
    try:
        for cfg in (config, replace(config, idle_max_s=15.0)):
            n = idle_count(stack, cfg, a.seconds)
            rows.append(
                {
                    "idle_min_s": cfg.idle_min_s,
                    "idle_max_s": cfg.idle_max_s,
                    "seconds": a.seconds,
                    "receives": n,
                    "per_agent_hour": n * 3600 / a.seconds,
                    "steady_per_agent_hour": 3600 / cfg.idle_max_s,
                }
            )
    finally:
        localstack.down(root)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"rows": rows}, indent=2))
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    # Stopped with SIGTERM, as with Ctrl-C: its ``finally`` stops the stack it started.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    main()
