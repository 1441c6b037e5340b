"""Azurite's group commit (scripts/azurite.js) keeps what it acknowledged: concurrent
requests share a save of the metadata database, and each answer still follows the save that
holds its change. Many writers send messages and put blobs at once; Azurite is SIGKILLed
the moment enough were acknowledged, with requests in flight; after a restart every
acknowledged message and blob is there. And a request's lookup and its change are not split
by another request's save: only the outermost store call waits for the save."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.core.exceptions import AzureError, HttpResponseError
from azure.storage.blob import BlobClient, BlobServiceClient
from azure.storage.queue import QueueClient

from adapters.local import AZURITE_ACCOUNT, AZURITE_KEY
from benchctl import localstack
from benchctl.local_procs import wait_listening
from benchctl.localstack import Proc, Stack

CREDENTIAL = {"account_name": AZURITE_ACCOUNT, "account_key": AZURITE_KEY}
QUEUE, CONTAINER = "bench-acks", "acks"
WRITERS = 32
ENOUGH = 400  # acknowledged messages and blobs each before the kill


def body(key: str) -> bytes:
    return key.encode() * (4096 // len(key))


class Azurite:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.procs: list[Proc] = []

    def start(self) -> Stack:
        st = Stack(
            dir=str(self.directory),
            queue_port=localstack.free_port(),
            cosmos_port=0,
            api_port=0,
        )
        st.save()
        q, b = localstack.start_azurite(st)
        self.procs += [q, b]
        wait_listening("Azurite", q)
        wait_listening("Azurite blob service", b)
        return st

    def kill(self, st: Stack) -> None:
        for p in st.procs:
            if p.alive():
                os.killpg(p.pid, signal.SIGKILL)
        for p in st.procs:
            localstack.stop_proc(p, signal.SIGKILL, timeout=10)

    def stop_all(self) -> None:
        for p in self.procs:
            localstack.stop_proc(p, signal.SIGKILL, timeout=10)


@pytest.fixture
def azurite(tmp_path: Path) -> Iterator[Azurite]:
    a = Azurite(tmp_path / "stack")
    yield a
    a.stop_all()


@pytest.mark.stack
def test_concurrent_writes_acknowledged_before_a_sigkill_are_all_kept(azurite: Azurite) -> None:
    st = azurite.start()
    QueueClient(st.queue_uri, QUEUE, credential=CREDENTIAL).create_queue()
    BlobServiceClient(st.blob_uri, credential=CREDENTIAL).create_container(CONTAINER)
    acked: dict[str, set[str]] = {"messages": set(), "blobs": set()}
    lock = threading.Lock()
    enough = threading.Event()

    def writer(n: int) -> None:
        # No retries: a write is acknowledged, or fails once Azurite is gone.
        q = QueueClient(st.queue_uri, QUEUE, credential=CREDENTIAL, retry_total=0)
        blobs = BlobServiceClient(st.blob_uri, credential=CREDENTIAL, retry_total=0)
        container = blobs.get_container_client(CONTAINER)
        i = 0
        while True:
            key = f"w{n}-{i}"
            try:
                q.send_message(key)
                with lock:
                    acked["messages"].add(key)
                container.upload_blob(key, body(key))
                with lock:
                    acked["blobs"].add(key)
                    if min(len(v) for v in acked.values()) >= ENOUGH:
                        enough.set()
            except AzureError:
                return  # Azurite is gone: what was not acknowledged may be lost
            i += 1

    threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(WRITERS)]
    for t in threads:
        t.start()
    assert enough.wait(120), f"the writers were too slow to test anything: {acked}"
    azurite.kill(st)  # every writer has a request in flight
    for t in threads:
        t.join(60)
    with lock:
        sent, put = set(acked["messages"]), set(acked["blobs"])

    st = azurite.start()
    q = QueueClient(st.queue_uri, QUEUE, credential=CREDENTIAL)
    kept: set[str] = set()
    while batch := list(q.receive_messages(messages_per_page=32, visibility_timeout=600)):
        kept |= {str(m.content) for m in batch}
    assert sent - kept == set()
    container = BlobServiceClient(st.blob_uri, credential=CREDENTIAL).get_container_client(
        CONTAINER
    )
    stored = set(container.list_blob_names())
    assert put - stored == set()
    for key in sorted(put):
        assert container.download_blob(key).readall() == body(key)


BLOBS = 3  # few blobs, so that the changers meet on them
CHANGES = 200  # per changer: about 10 s in all


def change(blob: BlobClient, kind: int) -> None:
    if kind == 0:
        blob.upload_blob(b"x" * 100, overwrite=True)
    elif kind == 1:
        blob.delete_blob()
    elif kind == 2:
        blob.create_append_blob()
        blob.append_block(b"y" * 10)
    else:
        blob.acquire_lease(15).release()


@pytest.mark.stack
def test_concurrent_changes_of_a_blob_never_fail_inside_azurite(azurite: Azurite) -> None:
    """Writers overwrite, delete, append to and lease the same few blobs at once. Each of
    Azurite's store methods looks a blob up and then changes it; if the lookup (a store method
    too) waited for a save, another request could delete or replace the blob in between, and
    LokiJS would throw on the change: a 500 (retries would hide it, so there are none)."""
    st = azurite.start()
    BlobServiceClient(st.blob_uri, credential=CREDENTIAL).create_container(CONTAINER)
    answers: Counter[tuple[int, int]] = Counter()  # (kind, status) -> how many
    lock = threading.Lock()

    def changer(n: int) -> None:
        blobs = BlobServiceClient(st.blob_uri, credential=CREDENTIAL, retry_total=0)
        container = blobs.get_container_client(CONTAINER)
        for i in range(CHANGES):
            kind = (n + i) % 4
            try:
                change(container.get_blob_client(f"b{i % BLOBS}"), kind)
                status = 200
            except HttpResponseError as e:  # 404, 409, 412: the others got there first
                status = e.status_code or 0
            with lock:
                answers[kind, status] += 1

    threads = [threading.Thread(target=changer, args=(n,)) for n in range(WRITERS // 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sum(answers.values()) == WRITERS // 2 * CHANGES
    assert all(answers[kind, 200] > 0 for kind in range(4)), answers
    assert {k: v for k, v in answers.items() if k[1] >= 500} == {}
