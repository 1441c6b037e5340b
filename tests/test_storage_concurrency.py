"""Concurrent calls to Azure Storage share what they can (issue 29.2: intake of 1,000 items
and the finalizer's 1,000 timeline reads): a step's messages go out SEND_CONCURRENCY at a
time, Azurite's queue appends them to several extents at once so that their durable saves
are shared (scripts/azurite.js), and the storage clients keep a connection per thread that
shares them instead of discarding all but 10 (adapters/transport.py)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from adapters.blob import BlobArtifacts
from adapters.queue import SEND_CONCURRENCY, WorkQueues
from adapters.transport import POOL_SIZE
from benchctl.localstack import Stack
from core.models import WorkItem, Workload
from tests.test_azurite_group_commit import Azurite

POOL = "concurrency"
RUN = "r-" + "c" * 32
DISCARDED = "Connection pool is full"


@pytest.fixture
def azurite(tmp_path: Path) -> Iterator[tuple[Azurite, Stack]]:
    a = Azurite(tmp_path / "stack")
    yield a, a.start()
    a.stop_all()


def items(n: int) -> list[WorkItem]:
    return [
        WorkItem(
            run_id=RUN,
            item_id=f"{RUN}.s0.c{c}",
            step=0,
            client=c,
            clients=n,
            pool=POOL,
            targets=["scratch"],
            engine="fio",
            workload=Workload(),
        )
        for c in range(n)
    ]


def discarded(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if DISCARDED in r.getMessage()]


@pytest.mark.stack
def test_a_steps_messages_go_out_many_at_once_on_kept_connections(
    azurite: tuple[Azurite, Stack], caplog: pytest.LogCaptureFixture
) -> None:
    _, st = azurite
    queues = WorkQueues.connect(st.queue_uri, local_emulators=True)
    queues.ensure_pool(POOL)
    in_flight, most = 0, 0
    lock = threading.Lock()
    send = queues._send
    # Each send waits until SEND_CONCURRENCY are under way: a sender that runs fewer at once
    # breaks the barrier (its timeout), one that runs more shows in `most`. Without it the
    # first sends could end before the last of 128 threads started (107 at 19:37 UTC).
    together = threading.Barrier(SEND_CONCURRENCY, timeout=30)

    def counted(name: str, body: str) -> None:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        try:
            together.wait()
            send(name, body)
        finally:
            with lock:
                in_flight -= 1

    queues._send = counted  # type: ignore[method-assign]
    caplog.set_level(logging.WARNING, logger="urllib3.connectionpool")
    queues.send_all(items(256))
    assert most == SEND_CONCURRENCY == 128
    assert discarded(caplog) == []
    assert queues.approximate_count(f"bench-{POOL}") == 256


@pytest.mark.stack
def test_azurite_appends_concurrent_messages_to_several_extents(
    azurite: tuple[Azurite, Stack],
) -> None:
    """With one extent (Azurite's own setting) every send waited for the one before it to
    be saved: concurrent sends never shared a save."""
    _, st = azurite
    queues = WorkQueues.connect(st.queue_uri, local_emulators=True)
    queues.ensure_pool(POOL)
    queues.send_all(items(256))
    extents = [p for p in (Path(st.dir) / "azurite" / "__queuestorage__").iterdir() if p.is_file()]
    used = [p for p in extents if p.stat().st_size > 0]
    assert len(used) > 1, f"every message in {len(used)} extent file(s)"


@pytest.mark.stack
def test_blob_reads_from_every_api_thread_keep_their_connections(
    azurite: tuple[Azurite, Stack], caplog: pytest.LogCaptureFixture
) -> None:
    """The API's worker threads (and the finalizer's timeline reads) share one blob client:
    with requests' default pool of 10 each call beyond 10 at once opened a connection and
    dropped it."""
    _, st = azurite
    blobs = BlobArtifacts.connect(st.blob_uri, local_emulators=True)
    blobs.ensure_container()
    names = [f"{RUN}.s0.c{c}" for c in range(POOL_SIZE)]
    for name in names:
        blobs.put(RUN, name, "timeline", name.encode())
    caplog.set_level(logging.WARNING, logger="urllib3.connectionpool")
    with ThreadPoolExecutor(POOL_SIZE) as pool:
        got = list(pool.map(lambda n: blobs.get(RUN, n, "timeline"), names * 4))
    assert got == [n.encode() for n in names * 4]
    assert discarded(caplog) == []
