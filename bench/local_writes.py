"""What keeping the local stack's data on disk costs: timed writes against the local servers.

Starts one Cosmos DB server and one Azurite queue service in a temporary directory, either
in memory (as the stack ran before it kept its data) or with the data on disk (journaled
Cosmos DB server, Azurite with ``--location``), then times, through the project's own
adapters (``CosmosStore``, ``WorkQueues``):
- 1,000 run document creates, then 1,000 compare-and-swap replaces (ETag), one at a time
  and from 16 threads (the API's writes during a scale-out step arrive concurrently);
- 1,000 queue messages each sent, received and deleted (a short queue, as agents use it);
  then 1,000 sent, then all received and deleted (a backlog), one at a time; then the same
  backlog from 8 threads (a step's sender sends 8 at a time, adapters/queue.py) and from 32
  (many agents at once);
- 1,000 blobs of 8 KiB put (artifacts) from 1 and from 32 threads.

Usage: .venv/bin/python bench/local_writes.py --mode memory|disk [--server PATH]
[--azurite PATH] [--only cosmos,queue,blob] [-n 1000]
(``--server`` runs another copy of scripts/cosmosdb-server.js, ``--azurite`` of
scripts/azurite.js, e.g. an older checkout's: ``git show REV:scripts/azurite.js >
/tmp/x/azurite.js``; it finds the checkout's node_modules through NODE_PATH).
Prints one JSON object per figure (seconds and operations per second).
"""

from __future__ import annotations

import argparse
import json
import signal
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from adapters.blob import BlobArtifacts
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
        docs[i] = store.container("runs").create({"id": f"r-{tag}-{i}", **RUN_DOC})

    def replace(i: int) -> None:
        doc = docs[i]
        docs[i] = store.container("runs").replace({**doc, "state": "completed"}, doc["_etag"])

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

    figures = [
        # How agents use it: a step's few messages are sent, taken and deleted.
        timed("queue send+receive+delete, short queue", n, round_trip, 1),
        # A backlog of n messages: each save rewrites Azurite's whole metadata database.
        timed("queue send, growing backlog", n, send, 1),
        timed("queue receive+delete, shrinking backlog", n, take, 1),
    ]
    for threads in (8, 32):  # concurrent requests share a save (group commit)
        figures += [
            timed("queue send, growing backlog", n, send, threads),
            timed("queue receive+delete, shrinking backlog", n, take, threads),
        ]
    return figures


def blob_figures(blobs: BlobArtifacts, n: int) -> list[dict[str, Any]]:
    data = b"1, 2, 3, 4\n" * 745  # 8 KiB, a few seconds of a per-second fio log

    def put(tag: str) -> Callable[[int], None]:
        return lambda i: blobs.put(f"r-{tag}", f"r-{tag}.s0.c{i}", "fio.log", data)

    return [
        timed("blob put 8 KiB, blobs kept growing", n, put("seq"), 1),
        timed("blob put 8 KiB, blobs kept growing", n, put("par"), 32),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["memory", "disk"], required=True)
    ap.add_argument("--server", type=Path, help="the Cosmos DB server script to run")
    ap.add_argument("--azurite", type=Path, help="the Azurite wrapper to run (disk mode)")
    ap.add_argument("--only", default="cosmos,queue,blob", help="which figures")
    ap.add_argument("-n", type=int, default=1000)
    a = ap.parse_args()
    only = set(a.only.split(","))
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
                start_on_disk(stack, a.azurite)
            else:
                start_in_memory(stack, a.server)
            figures: list[dict[str, Any]] = []
            if "cosmos" in only:
                store = CosmosStore.from_settings(stack.settings())
                figures += cosmos_figures(store, a.n, 1, "seq")
                figures += cosmos_figures(store, a.n, 16, "par")
            if "queue" in only:
                figures += queue_figures(WorkQueues.from_settings(stack.settings()), a.n)
            if "blob" in only:
                blobs = BlobArtifacts.connect(stack.blob_uri, local_emulators=True)
                blobs.ensure_container()
                figures += blob_figures(blobs, a.n)
        finally:
            localstack.down(Path(tmp))
    for f in figures:
        print(json.dumps({"mode": a.mode, **f}))


def start_on_disk(stack: Stack, azurite: Path | None) -> None:
    """The stack's emulators, their data on disk; ``azurite``: another wrapper script."""
    if azurite is None:
        localstack.start_emulators(stack)
        return
    node_path = {"NODE_PATH": str(localstack.ROOT / "node_modules")}
    common = ["--location", str(stack.data_dir("azurite")), "--disableTelemetry"]
    common += ["--skipApiVersionCheck", "--silent"]
    queue = ["--queueHost", "127.0.0.1", "--queuePort", str(stack.queue_port), "--loose"]
    blob = ["--blobHost", "127.0.0.1", "--blobPort", str(stack.blob_port)]
    script = ["node", str(azurite)]
    q = localstack._spawn(stack, "azurite", [*script, "queue", *queue, *common], node_path)
    b = localstack._spawn(stack, "azurite-blob", [*script, "blob", *blob, *common], node_path)
    c = localstack.start_cosmos(stack)
    localstack.wait_listening("Azurite", q)
    localstack.wait_listening("Azurite blob service", b)
    localstack.wait_listening("Cosmos DB server", c)
    CosmosStore.from_settings(stack.settings()).ensure_containers()
    WorkQueues.from_settings(stack.settings()).ensure_pool("default")


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
    b = localstack._spawn(
        stack,
        "azurite-blob",
        [
            str(localstack.BIN / "azurite-blob"),
            *("--blobHost", "127.0.0.1", "--blobPort", str(stack.blob_port)),
            *("--inMemoryPersistence", "--disableTelemetry", "--skipApiVersionCheck", "--silent"),
        ],
        port=stack.blob_port,
    )
    script = server or localstack.ROOT / "scripts" / "cosmosdb-server.js"
    c = localstack._spawn(
        stack, "cosmosdb", ["node", str(script), "127.0.0.1", str(stack.cosmos_port)]
    )
    localstack.wait_listening("Azurite", q)
    localstack.wait_listening("Azurite blob service", b)
    localstack.wait_listening("Cosmos DB server", c)
    CosmosStore.from_settings(stack.settings()).ensure_containers()
    WorkQueues.from_settings(stack.settings()).ensure_pool("default")


if __name__ == "__main__":
    # Stopped with SIGTERM, as with Ctrl-C: its ``finally`` stops the stack it started.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    main()
