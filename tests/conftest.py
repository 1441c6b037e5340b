"""Fixtures: the local servers (Azurite; the Cosmos DB stand-in, @vercel/cosmosdb-server,
which has no GROUP BY, OFFSET/LIMIT, DISTINCT, TTL, auth or throttling: README, "The local
stack"; the API under uvicorn) and real agent processes running real fio. Started once per
session on random free ports; their logs are attached to any failing test that used them."""

from __future__ import annotations

import base64
import itertools
import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.queue import WorkQueues
from benchctl import localstack
from benchctl.localstack import Proc, Stack
from core.engines.fio_logs import timeline_from_logs
from core.engines.results import build_result
from core.models import HostFacts, MountFacts, WorkItem
from tests.bot_world import World
from tests.lanes import (  # noqa: F401  (hooks: pytest finds them by name in a conftest)
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_terminal_summary,
)
from tests.loopback import Quiet, serve

BOT_POOL = "bot"  # where the chat tests' target "chat" lives
# Schemathesis' generated runs go to a pool and target no other test uses; no agent listens
# on it, so whatever it accepts stays queued and no fio runs.
FUZZ_POOL = FUZZ_TARGET = "fuzz"
# The fleet tests' pool (tests/test_fleet.py): it declares no size, so it is judged on its
# live agents alone. (The elastic pool test has a stack of its own.)
FLEET_POOL = "fleet"
# Schemathesis' generated registrations land here (tests/schemathesis_hooks.py).
FUZZ_AGENT_POOL = "fuzz-agents"
PER_TEST_POOLS = [f"t{i}" for i in range(1, 121)]
TEST_POOLS = ["default", *PER_TEST_POOLS, BOT_POOL, FUZZ_POOL, FLEET_POOL, FUZZ_AGENT_POOL]
_pool_names = iter(PER_TEST_POOLS)
# What the pools declare (BENCH_POOLS). The per-test pools declare a size of 16, what the
# tests' agents could be: tests start their agents before or after they submit, and some
# ask for more clients than they start (to see a step fail at its barrier), so a per-test
# pool is never judged on how many of its agents happen to be registered yet.
POOL_SPECS = [f"{p}:size=16" if p in PER_TEST_POOLS else p for p in TEST_POOLS]
_agent_ids = itertools.count(1)


WEBHOOK_SECRET = b"test-webhook-secret"
TEAMS_BOT_SECRET_B64 = base64.b64encode(b"teams-outgoing-webhook-test-key!").decode()
BOT_SECRET = "test-bot-secret"
# The target registry: every test pool has "scratch" and "other" (read-write), "golden"
# (read-only, no data set), "archive" (read-only, reads the data set ARCHIVE_DATASET) and
# "capped"/"roomy" (declared limits); the chat tests' "chat" target is in its own pool.
ARCHIVE_DATASET = {"directory": "bench-data", "files": 4, "file_size": "8m"}
TEST_TARGETS = (
    [
        {"alias": alias, "pool": p, "read_only": alias == "golden"}
        for p in TEST_POOLS
        if p not in (BOT_POOL, FUZZ_POOL)
        for alias in ("scratch", "other", "vol1", "vol2", "golden")
    ]
    + [
        # Declared limits for the "what bound the run" tests (tests/test_ceilings_stack.py).
        {"alias": alias, "pool": p, "limits": {"read_mibps": mibps}}
        for p in TEST_POOLS
        if p not in (BOT_POOL, FUZZ_POOL)
        for alias, mibps in (("capped", 40), ("roomy", 4000))
    ]
    + [
        {"alias": "archive", "pool": p, "read_only": True, "dataset": ARCHIVE_DATASET}
        for p in TEST_POOLS
        if p not in (BOT_POOL, FUZZ_POOL)
    ]
    + [
        # Declared limits, so the chat doors' cards show what bound the run.
        {"alias": "chat", "pool": BOT_POOL, "limits": {"read_mibps": 4000}},
        {"alias": "golden", "pool": BOT_POOL, "read_only": True},
        {"alias": FUZZ_TARGET, "pool": FUZZ_POOL},
    ]
)


class Receiver:
    """A loopback HTTP server that records every POST (the generic webhook's target)."""

    def __init__(self) -> None:
        self.posts: list[tuple[dict[str, str], bytes]] = []
        received = self.posts

        class Handler(Quiet):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                received.append(({k: v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.end_headers()

        self.server, self.url = serve(Handler, "/hook")


@pytest.fixture(scope="session")
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.fixture(scope="session")
def teams_receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.fixture(scope="session")
def openapi_json() -> str:
    """The API's OpenAPI document, built once per session: a build takes 1.5-4 s, and three
    test modules read it."""
    from functions.api import create_app  # here: most sessions never build it

    return json.dumps(create_app().openapi())


@pytest.fixture
def openapi_document(openapi_json: str) -> dict[str, Any]:
    """A copy of the document of its own for each test, free to change."""
    doc: dict[str, Any] = json.loads(openapi_json)
    return doc


@pytest.fixture(scope="session")
def bot_world() -> Iterator[World]:
    """The Teams bot's issuer, identity endpoint, Graph and Bot Connector (tests/bot_world.py)."""
    w = World().start()
    yield w
    w.stop()


@pytest.fixture(scope="session")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
    receiver: Receiver,
    teams_receiver: Receiver,
    bot_world: World,
) -> Iterator[Stack]:
    localstack.ensure_installed()
    directory = tmp_path_factory.mktemp("stack")
    st = Stack(
        dir=str(directory),
        queue_port=localstack.free_port(),
        cosmos_port=localstack.free_port(),
        api_port=0,  # picked when the API binds it (localstack.start_api)
        blob_port=localstack.free_port(),
        pools=POOL_SPECS,
        visibility_timeout=6,
        max_deliveries=3,
        heartbeat_s=2.0,
    )
    st.save()
    try:
        localstack.start_emulators(st)
        localstack.start_api(
            st,
            timer_seconds=0.5,
            extra_env={
                "BENCH_WEBHOOK_URL": receiver.url,
                "BENCH_WEBHOOK_SECRET": WEBHOOK_SECRET.decode(),
                # This 2-core machine's run-to-run noise exceeds the default 10 %.
                "BENCH_GATE_PCT": "30",
                "BENCH_TEAMS_WEBHOOK_URL": teams_receiver.url,
                "BENCH_TEAMS_BOT_SECRET": TEAMS_BOT_SECRET_B64,
                "BENCH_BOT_SECRET": BOT_SECRET,
                "BENCH_TARGETS": json.dumps(TEST_TARGETS),
                **bot_world.env(),
            },
        )
        yield st
    finally:
        localstack.down(directory)


@pytest.fixture
def pool() -> str:
    """A pool (queue) of its own for each test, so tests never take each other's work."""
    return next(_pool_names)


@pytest.fixture
def api(stack: Stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.api_url, timeout=30) as client:
        yield client


@pytest.fixture
def store(stack: Stack) -> CosmosStore:
    return CosmosStore.from_settings(stack.settings())


@pytest.fixture
def queues(stack: Stack) -> WorkQueues:
    return WorkQueues.from_settings(stack.settings())


@pytest.fixture
def artifacts(stack: Stack) -> BlobArtifacts:
    return BlobArtifacts.connect(stack.blob_uri, local_emulators=True)


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    d = tmp_path / "scratch"
    d.mkdir()
    return d


AgentFactory = Callable[..., Proc]


@pytest.fixture
def agents(stack: Stack, pool: str, scratch: Path) -> Iterator[AgentFactory]:
    started: list[Proc] = []

    def start(*, targets: dict[str, str] | None = None, extra: list[str] | None = None) -> Proc:
        p = localstack.start_agent(
            stack,
            f"{pool}-{next(_agent_ids)}",
            pool=pool,
            targets=targets if targets is not None else {"scratch": str(scratch)},
            extra=extra,
        )
        started.append(p)
        return p

    yield start
    for p in started:
        localstack.stop_proc(p, signal.SIGKILL, timeout=5)


def wait_until(
    check: Callable[[], Any], timeout: float = 60, interval: float = 0.25, what: str = "condition"
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class Clock:
    """A service's clock (RunService(clock=...)) that tests move ahead by ``offset`` s."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def run_body(pool: str, **workload: Any) -> dict[str, Any]:
    w = {"rw": "randread", "bs": "4k", "size": "8m", "runtime": 2, "iodepth": 4}
    w.update(workload)
    return {"target": "scratch", "pool": pool, "workload": w, "tags": {"test": "yes"}}


def wait_state(
    api: httpx.Client, run_id: str, states: tuple[str, ...], timeout: float = 90
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        run: dict[str, Any] = api.get(f"/api/runs/{run_id}").json()
        return run if run["state"] in states else None

    result: dict[str, Any] = wait_until(check, timeout, what=f"run {run_id} to be {states}")
    return result


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when == "call" and report.failed and "stack" in getattr(item, "fixturenames", ()):
        st: Stack = item.funcargs["stack"]  # type: ignore[attr-defined]
        for p in st.procs:
            report.sections.append((f"log of {p.name}", localstack.tail(p.log, 40)))


FIO_CAPTURE = Path(__file__).parent / "data" / "fio-randrw"


def result_from_capture(item: WorkItem, agent_id: str) -> dict[str, Any]:
    """A client's result built from real fio output captured here (tests/data/fio-randrw)."""
    doc = json.loads((FIO_CAPTURE / "fio.json").read_text())
    iops = [p.read_text() for p in sorted(FIO_CAPTURE.glob("bench_iops.*.log"))]
    bw = [p.read_text() for p in sorted(FIO_CAPTURE.glob("bench_bw.*.log"))]
    mount = MountFacts(
        alias="scratch", path="/x", mount_point="/", fstype="ext4", options="rw", source="/dev/vda"
    )
    result = build_result(
        item,
        fio_json=doc,
        timeline=timeline_from_logs(iops, bw),
        agent_id=agent_id,
        host=HostFacts(hostname="h", kernel="k", os="o", cpu_count=2),
        mounts=[mount],
    )
    return result.model_dump(mode="json")


TmpfsFactory = Callable[..., Path]


@pytest.fixture
def tmpfs() -> Iterator[TmpfsFactory]:
    """Mounts a real tmpfs (the tests run as root), of ``size`` bytes and, given
    ``nr_inodes``, that many inodes; every mount is undone at teardown (read-only
    remounted or not), a lazy unmount so files still open cannot keep it."""
    import subprocess

    mounted: list[Path] = []

    def mount(
        path: Path, size: str = "16m", source: str = "tmpfs", nr_inodes: int | None = None
    ) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        options = f"size={size}" + (f",nr_inodes={nr_inodes}" if nr_inodes else "")
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, source, str(path)], check=True)
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)
