"""The local stack loses no data: the real emulators (Azurite's queue and blob services, the
Cosmos DB server) keep what they acknowledged across a SIGKILL, a clean `down` and `up`;
`benchctl local up --fresh` starts empty. Each test starts its own emulators in a directory
of its own (never the session stack's)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import AzureError
from azure.cosmos import CosmosClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient

from adapters.blob import CONTAINER, BlobArtifacts
from adapters.cosmos import CONTAINERS, CosmosStore
from adapters.local import AZURITE_ACCOUNT, AZURITE_KEY, COSMOS_EMULATOR_KEY
from adapters.queue import WorkQueues, poison_queue_name, work_queue_name
from benchctl import localstack
from benchctl.localstack import Stack
from core.errors import Conflict
from core.models.document import StoredJson

WORK = work_queue_name("default")
AZURITE_CREDENTIAL = {"account_name": AZURITE_ACCOUNT, "account_key": AZURITE_KEY}


class Emulators:
    """Starts and kills the emulators of one stack directory, as often as a test needs."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: list[Stack] = []

    def start(self) -> Stack:
        st = Stack(
            dir=str(self.directory),
            queue_port=localstack.free_port(),
            cosmos_port=localstack.free_port(),
            api_port=localstack.free_port(),
        )
        st.save()
        self.started.append(st)
        localstack.start_emulators(st)
        return st

    def start_cosmos(self, env: dict[str, str] | None = None) -> Stack:
        st = Stack(
            dir=str(self.directory), queue_port=0, cosmos_port=localstack.free_port(), api_port=0
        )
        st.save()
        self.started.append(st)
        p = localstack.start_cosmos(st, env)
        localstack.wait_listening("Cosmos DB server", p, 30)
        CosmosStore.from_settings(st.settings()).ensure_containers()
        return st

    def kill(self, st: Stack) -> None:
        """SIGKILL every emulator of the stack at once: no chance to save anything."""
        for p in st.procs:
            if p.alive():
                os.killpg(p.pid, signal.SIGKILL)
        for p in st.procs:
            localstack.stop_proc(p, signal.SIGKILL, timeout=10)
            assert not p.alive()

    def stop_all(self) -> None:
        for st in self.started:
            for p in st.procs:
                localstack.stop_proc(p, signal.SIGKILL, timeout=10)


@pytest.fixture
def emulators(tmp_path: Path) -> Iterator[Emulators]:
    e = Emulators(tmp_path / "stack")
    yield e
    e.stop_all()


def clients(st: Stack) -> tuple[CosmosStore, WorkQueues, BlobArtifacts]:
    settings = st.settings()
    return (
        CosmosStore.from_settings(settings, pool_size=16),
        WorkQueues.from_settings(settings),
        BlobArtifacts.connect(st.blob_uri, local_emulators=True),
    )


def every_document(store: CosmosStore) -> dict[str, list[StoredJson]]:
    """Every document of every container: ids, partition keys, content and ETag."""
    return {
        name: sorted(store.container(name).query("SELECT * FROM c", []), key=lambda d: str(d["id"]))
        for name in CONTAINERS
    }


def queued(queues: WorkQueues) -> tuple[int, list[str]]:
    """Messages in the work queue (visible or not) and the visible ones' text."""
    q = queues.client(WORK)
    peeked = sorted(str(m.content) for m in q.peek_messages(max_messages=32))
    return queues.approximate_count(WORK), peeked


def write_a_bit_of_everything(store: CosmosStore, queues: WorkQueues, tag: str) -> dict[str, Any]:
    """Runs, items, results, aggregates, series, schedules and a target lock, with creates,
    compare-and-swap replaces and deletes; messages sent, received, renewed and deleted."""
    c = store.container
    run = c("runs").create({"id": f"r-{tag}", "state": "queued", "targets": ["scratch"]})
    run = c("runs").replace({**run, "state": "running"}, run["_etag"])
    c("items").create({"id": f"r-{tag}.s0.c0", "run_id": f"r-{tag}", "state": "claimed"})
    c("results").create({"id": f"r-{tag}.s0.c0", "run_id": f"r-{tag}", "iops": 1234.5})
    c("aggregates").create({"id": f"r-{tag}.s0", "run_id": f"r-{tag}", "clients": 1})
    c("series").create({"id": f"k.r-{tag}.s0", "series_key": "k", "iops": 1234.5})
    kept = c("schedules").create({"id": f"sch-{tag}", "cron": "0 * * * *", "enabled": True})
    kept = c("schedules").replace({**kept, "enabled": False}, kept["_etag"])
    c("schedules").create({"id": f"sch-{tag}-gone", "cron": "0 0 * * *"})
    c("schedules").delete(f"sch-{tag}-gone", f"sch-{tag}-gone")
    lock = c("targets").create({"id": f"default:{tag}", "run_id": None})

    q = queues.client(WORK)
    for i in range(5):
        q.send_message(f"{tag}-{i}")
    taken = q.receive_message(visibility_timeout=300)  # held by an "agent": stays invisible
    assert taken is not None
    q.update_message(taken, visibility_timeout=300)
    done = q.receive_message(visibility_timeout=300)
    assert done is not None
    q.delete_message(done)
    return {"run": run, "lock": lock, "schedule": kept}


@pytest.mark.stack
def test_sigkill_and_down_lose_no_acknowledged_data(emulators: Emulators) -> None:
    st = emulators.start()
    store, queues, artifacts = clients(st)
    first = write_a_bit_of_everything(store, queues, "a")
    artifacts.put("r-a", "r-a.s0.c0", "fio.log", b"1, 2, 3\n" * 1000)
    documents, messages = every_document(store), queued(queues)
    assert messages[0] == 4 and len(messages[1]) == 3
    emulators.kill(st)  # right after the last acknowledged write

    st = emulators.start()
    store, queues, artifacts = clients(st)
    assert every_document(store) == documents
    assert queued(queues) == messages
    assert artifacts.get("r-a", "r-a.s0.c0", "fio.log") == b"1, 2, 3\n" * 1000
    # Compare-and-swap goes on from the ETags read before the crash...
    run = store.container("runs").replace(
        {**first["run"], "state": "completed"}, first["run"]["_etag"]
    )
    store.container("targets").replace({**first["lock"], "run_id": "r-b"}, first["lock"]["_etag"])
    # ...and refuses a stale one.
    with pytest.raises(Conflict):
        store.container("runs").replace({**first["run"], "state": "failed"}, first["run"]["_etag"])
    write_a_bit_of_everything(store, queues, "b")  # new resource ids do not clash with old
    documents, messages = every_document(store), queued(queues)
    assert len(documents["runs"]) == 2 and messages[0] == 8

    localstack.down(Path(st.dir))  # a clean stop keeps it all too
    st = emulators.start()
    store, queues, _ = clients(st)
    assert every_document(store) == documents
    assert queued(queues) == messages
    assert store.container("runs").read("r-a", "r-a") == run

    # Agents poll empty queues all the time: that must not rewrite Azurite's database.
    db = Path(st.dir) / "azurite" / "__azurite_db_queue__.json"
    before = db.stat().st_ino
    empty = queues.client(poison_queue_name("default"))
    for _ in range(10):
        assert empty.receive_message() is None
        assert list(empty.peek_messages()) == []
    assert db.stat().st_ino == before


@pytest.mark.stack
def test_writes_acknowledged_before_a_sigkill_under_load_are_all_kept(
    emulators: Emulators,
) -> None:
    """Eight writers create documents and send messages as fast as they can; the emulators
    are killed mid-stream. Every write that was acknowledged must be there afterwards."""
    st = emulators.start()
    acknowledged: dict[str, set[str]] = {"docs": set(), "messages": set()}
    stop = threading.Event()

    def writer(n: int) -> None:
        # The SDKs' own clients without retries: a write either is acknowledged or fails
        # once the emulators are gone (retries would wait for minutes).
        results = (
            CosmosClient(
                st.cosmos_endpoint,
                credential=COSMOS_EMULATOR_KEY,
                connection_verify=False,
                enable_endpoint_discovery=False,
                retry_total=0,
                retry_connect=0,
            )
            .get_database_client("bench")
            .get_container_client("results")
        )
        q = QueueClient(st.queue_uri, WORK, credential=AZURITE_CREDENTIAL, retry_total=0)
        i = 0
        while not stop.is_set():
            key = f"w{n}-{i}"
            try:
                results.create_item({"id": key, "run_id": f"r-{n}", "pad": "x" * 1500})
                acknowledged["docs"].add(key)
                q.send_message(key)
                acknowledged["messages"].add(key)
            except AzureError:
                return  # the emulator is gone: what was not acknowledged may be lost
            i += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(acknowledged["messages"]) < 150 and time.monotonic() < deadline:
        time.sleep(0.05)
    emulators.kill(st)
    stop.set()
    for t in threads:
        t.join(120)
    assert len(acknowledged["messages"]) >= 150, "the writers were too slow to test anything"

    st = emulators.start()
    store, _, _ = clients(st)
    kept_docs = {str(d["id"]) for d in store.container("results").query("SELECT c.id FROM c", [])}
    assert acknowledged["docs"] <= kept_docs
    q = QueueClient(st.queue_uri, WORK, credential=AZURITE_CREDENTIAL)
    kept_messages: set[str] = set()
    while batch := list(q.receive_messages(messages_per_page=32, visibility_timeout=300)):
        kept_messages |= {str(m.content) for m in batch}
        if len(batch) < 32:
            break
    assert acknowledged["messages"] <= kept_messages


@pytest.mark.stack
def test_the_journal_is_compacted_and_survives_torn_and_bad_records(
    emulators: Emulators,
) -> None:
    journal_dir = emulators.directory / "cosmosdb"
    st = emulators.start_cosmos({"COSMOSDB_COMPACT_BYTES": "65536"})
    store = CosmosStore.from_settings(st.settings())
    runs = store.container("runs")
    doc = runs.create({"id": "r-hot", "state": "running", "pad": "y" * 1000, "n": 0})
    for n in range(1, 301):  # ~600 KB of journal records for one document
        doc = runs.replace({**doc, "n": n}, doc["_etag"])
    runs.create({"id": "r-cold", "state": "queued"})
    # A user-defined function is kept too, and works after a restart.
    store.container("runs").proxy.scripts.create_user_defined_function(
        {"id": "twice", "body": "function (x) { return 2 * x; }"}
    )
    files = list(journal_dir.iterdir())
    assert len(files) == 1 and files[0].stat().st_size < 3 * 65536, files
    assert int(files[0].name.split("-")[1].split(".")[0]) > 2  # it was compacted while up
    documents = every_document(store)
    emulators.kill(st)

    # A record the process was writing when it died (never fdatasync'ed, so never
    # acknowledged) is dropped at start.
    journal = next(journal_dir.iterdir())
    with journal.open("ab") as f:
        f.write(b'{"op":"put","at":["bench","runs","docs"],"doc":{"id":"r-torn"')
    st = emulators.start_cosmos()
    store = CosmosStore.from_settings(st.settings())
    assert every_document(store) == documents
    runs = store.container("runs")
    assert runs.replace({**doc, "state": "completed"}, doc["_etag"])["n"] == 300
    twice = "SELECT VALUE udf.twice(c.n) FROM c WHERE c.id = 'r-hot'"
    rows: list[Any] = list(runs.proxy.query_items(twice, enable_cross_partition_query=True))
    assert rows == [600]
    emulators.kill(st)

    # A damaged record in the middle is not skipped: the server refuses to start.
    journal = next(journal_dir.iterdir())
    text = journal.read_text().splitlines()
    journal.write_text("\n".join([*text[:3], "{not json", *text[3:]]) + "\n")
    with pytest.raises(localstack.StackError, match=r"line 4"):
        emulators.start_cosmos()


def benchctl(local_dir: Path, *args: str) -> str:
    env = {**os.environ, "BENCH_LOCAL_DIR": str(local_dir)}
    out = subprocess.run(
        [sys.executable, "-m", "benchctl", "local", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.stack
def test_benchctl_local_up_keeps_data_and_fresh_starts_empty(tmp_path: Path) -> None:
    local_dir = tmp_path / "local"
    up = ("up", "--agents", "0", "--target", f"scratch={tmp_path / 'scratch'}", "--create")
    try:
        benchctl(local_dir, *up)
        st = Stack.load(local_dir)
        assert st is not None
        port = st.api_port
        store, queues, artifacts = clients(st)
        write_a_bit_of_everything(store, queues, "a")
        artifacts.put("r-a", "r-a.s0.c0", "fio.log", b"log")
        status = benchctl(local_dir, "status")
        assert f"data: {local_dir / 'azurite'}, {local_dir / 'cosmosdb'}" in status
        assert "azurite-blob" in status
        benchctl(local_dir, "down")

        out = benchctl(local_dir, *up)  # without --fresh: what was there is still there
        st = Stack.load(local_dir)
        assert st is not None
        # The API's port too (a bookmark of the UI), unless someone took it meanwhile.
        assert st.api_port == port or f"port {port} is in use" in out, out
        store, queues, artifacts = clients(st)
        assert [r["id"] for r in store.container("runs").query("SELECT * FROM c", [])] == ["r-a"]
        assert queued(queues)[0] == 4
        assert artifacts.get("r-a", "r-a.s0.c0", "fio.log") == b"log"
        benchctl(local_dir, "down")

        fresh_ms = int(time.time() * 1000)
        out = benchctl(local_dir, *up, "--fresh")
        assert "started empty" in out
        st = Stack.load(local_dir)
        assert st is not None
        store, queues, _ = clients(st)
        # The stack's own timers record their ticks from the first second (/api/health).
        kept = every_document(store)
        ticks = kept.pop("ticks")
        assert {t["id"] for t in ticks} <= {"runs", "schedules"}
        assert all(t["at_ms"] >= fresh_ms for t in ticks)  # recorded since, by the new stack
        assert kept == {name: [] for name in CONTAINERS if name != "ticks"}
        assert queued(queues) == (0, [])
        blobs = BlobServiceClient(st.blob_uri, credential=AZURITE_CREDENTIAL)
        assert [b.name for b in blobs.get_container_client(CONTAINER).list_blobs()] == []
    finally:
        benchctl(local_dir, "down")


def test_a_state_file_from_before_the_blob_service_still_loads(tmp_path: Path) -> None:
    old = {
        "dir": str(tmp_path),
        "queue_port": 10001,
        "cosmos_port": 10002,
        "api_port": 10003,
        "pools": ["default"],
        "targets": {},
        "procs": [{"name": "api", "pid": 1, "log": "x", "port": 10003}],
        "visibility_timeout": 30,
        "max_deliveries": 5,
    }
    (tmp_path / "stack.json").write_text(json.dumps(old))
    st = Stack.load(tmp_path)
    assert st is not None and st.queue_port == 10001 and st.procs[0].name == "api"
    assert st.blob_uri == f"http://127.0.0.1:{st.blob_port}/devstoreaccount1"
    assert st.env()["BENCH_BLOB_URI"] == st.blob_uri
