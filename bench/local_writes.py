"""What keeping the local stack's data on disk costs: timed writes against the local servers.

Starts one Cosmos DB server and one Azurite queue service in a temporary directory, either
in memory (as the stack ran before it kept its data) or with the data on disk (journaled
Cosmos DB server, Azurite with ``--location``), then times, through the project's own
adapters (``CosmosStore``, ``WorkQueues``):
- 1,000 run document creates, then 1,000 compare-and-swap replaces (ETag), one at a time
  and from 16 threads (the API's writes during a scale-out step arrive concurrently);
- 1,000 queue messages each sent, received and deleted (a short queue, as agents use it);
  then 1,000 sent, then all received and deleted (a backlog), one at a time.

Usage: .venv/bin/python bench/local_writes.py --mode memory|disk [--server PATH] [-n 1000]
(``--server`` runs another copy of scripts/cosmosdb-server.js, e.g. an older checkout's).
Prints one JSON object of figures (seconds and operations per second).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues
from benchctl import localstack
from benchctl.localstack import Stack

RUN_DOC = {"state": "running", "tags": {"bench": "local_writes"}, "pad": "x" * 2000}


def timed(what: str, n: int, fn: Callable[[int], object], threads: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    if threads == 1:
        for i in range(n):
            fn(i)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(fn, range(n)))
    s = time.perf_counter() - t0
    return {"what": what, "n": n, "threads": threads, "s": round(s, 3), "per_s": round(n / s)}


def cosmos_figures(store: CosmosStore, n: int, threads: int, tag: str) -> list[dict[str, Any]]:
    docs: dict[int, dict[str, Any]] = {}

    def create(i: int) -> None:
        docs[i] = store.runs.create({"id": f"r-{tag}-{i}", **RUN_DOC})

    def replace(i: int) -> None:
        docs[i] = store.runs.replace({**docs[i], "state": "completed"})

    return [
        timed("cosmos create", n, create, threads),
        timed("cosmos replace (ETag)", n, replace, threads),
    ]


def queue_figures(queues: WorkQueues, n: int) -> list[dict[str, Any]]:
    q = queues.client("bench-default")

    def send(i: int) -> None:
        q.send_message(json.dumps({"i": i, "pad": "y" * 500}))

    def take(_: int) -> None:
        m = q.receive_message(visibility_timeout=30)
        assert m is not None
        q.delete_message(m)

    def round_trip(i: int) -> None:
        send(i)
        take(i)

    return [
        # How agents use it: a step's few messages are sent, taken and deleted.
        timed("queue send+receive+delete, short queue", n, round_trip, 1),
        # A backlog of n messages: each save rewrites Azurite's whole metadata database.
        timed("queue send, growing backlog", n, send, 1),
        timed("queue receive+delete, shrinking backlog", n, take, 1),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["memory", "disk"], required=True)
    ap.add_argument("--server", type=Path, help="the Cosmos DB server script to run")
    ap.add_argument("-n", type=int, default=1000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stack = Stack(
            dir=tmp,
            queue_port=localstack.free_port(),
            cosmos_port=localstack.free_port(),
            api_port=localstack.free_port(),
        )
        stack.save()
        try:
            if a.mode == "disk":
                localstack.start_emulators(stack)
            else:
                start_in_memory(stack, a.server)
            store = CosmosStore.from_settings(stack.settings())
            queues = WorkQueues.from_settings(stack.settings())
            figures = cosmos_figures(store, a.n, 1, "seq") + cosmos_figures(store, a.n, 16, "par")
            figures += queue_figures(queues, a.n)
        finally:
            localstack.down(Path(tmp))
    for f in figures:
        print(json.dumps({"mode": a.mode, **f}))


def start_in_memory(stack: Stack, server: Path | None) -> None:
    """The stack's emulators as they ran before they kept data: everything in memory."""
    q = localstack._spawn(
        stack,
        "azurite",
        [
            str(localstack.BIN / "azurite-queue"),
            *("--queueHost", "127.0.0.1", "--queuePort", str(stack.queue_port)),
            *("--inMemoryPersistence", "--disableTelemetry", "--skipApiVersionCheck"),
            *("--loose", "--silent"),
        ],
        port=stack.queue_port,
    )
    script = server or localstack.ROOT / "scripts" / "cosmosdb-server.js"
    c = localstack._spawn(
        stack, "cosmosdb", ["node", str(script), "127.0.0.1", str(stack.cosmos_port)]
    )
    localstack._wait("Azurite", lambda: localstack._port_open(stack.queue_port), q)
    localstack._wait("Cosmos DB server", lambda: localstack._port_open(stack.cosmos_port), c)
    CosmosStore.from_settings(stack.settings()).ensure_containers()
    WorkQueues.from_settings(stack.settings()).ensure_pool("default")


if __name__ == "__main__":
    main()
