"""The local stack: Azurite's queue and blob services, the Cosmos DB server, the API with its
timer loop, and N agents, all on loopback. Used by ``benchctl local`` and by the tests.

The emulators keep their data in the stack's directory (``azurite/``, ``cosmosdb/``), on
disk before they acknowledge a change, so it outlives ``down``/``up`` and a SIGKILL:
scripts/azurite.js and scripts/cosmosdb-server.js (with scripts/cosmosdb-journal.js)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from adapters.blob import BlobArtifacts
from adapters.config import Settings
from adapters.cosmos import CosmosStore
from adapters.local import azurite_blob_uri, azurite_queue_uri
from adapters.queue import WorkQueues
from benchctl import local_balancer
from benchctl.local_balancer import ensure_installed as ensure_installed
from benchctl.local_procs import Proc as Proc
from benchctl.local_procs import stop_proc as stop_proc
from benchctl.local_procs import tail as tail
from benchctl.local_procs import wait_api as wait_api
from benchctl.local_procs import wait_listening as wait_listening
from benchctl.local_state import (
    ROOT,
    StackError,
    api_port_for,
    free_ports,
    listen_on,
    pool_specs,
    remember_port,
    remove_data,
    state_dir,
)
from benchctl.local_state import free_port as free_port  # the tests' and benches' helper
from core.fleet.pools import DEFAULT_IDLE_S

SCRIPTS = ROOT / "scripts"
# The API's local pool scaler (benchctl.local_scaler) works on the stack in this directory.
LOCAL_SCALER_SETTING = (
    "BENCH_LOCAL_SCALER_DIR"  # in the stack's directory: what `up --fresh` removes
)


@dataclass
class Stack:
    dir: str
    queue_port: int
    cosmos_port: int
    api_port: int
    # A default, so state files written before the blob service existed still load.
    blob_port: int = field(default_factory=free_port)
    pools: list[str] = field(default_factory=lambda: ["default"])
    targets: dict[str, str] = field(default_factory=dict)
    procs: list[Proc] = field(default_factory=list)
    api_instances: int = 1  # > 1: that many uvicorn processes behind nginx on api_port
    visibility_timeout: int = 30
    max_deliveries: int = 5
    heartbeat_s: float = 30.0  # agents' registry heartbeat
    port_note: str | None = None  # why the API is not on the port it had
    # Where the API and the agents send traces and metrics (adapters/telemetry.py)
    telemetry: dict[str, str] = field(default_factory=dict)

    @property
    def queue_uri(self) -> str:
        return azurite_queue_uri(self.queue_port)

    @property
    def blob_uri(self) -> str:
        return azurite_blob_uri(self.blob_port)

    @property
    def cosmos_endpoint(self) -> str:
        return f"https://127.0.0.1:{self.cosmos_port}"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def env(self) -> dict[str, str]:
        return {
            "BENCH_QUEUE_URI": self.queue_uri,
            "BENCH_BLOB_URI": self.blob_uri,
            "BENCH_COSMOS_ENDPOINT": self.cosmos_endpoint,
            "BENCH_COSMOS_DATABASE": "bench",
            "BENCH_LOCAL_EMULATORS": "1",
            "BENCH_MAX_DELIVERIES": str(self.max_deliveries),
            "BENCH_POOLS": ",".join(self.pools),
        }

    @property
    def pool_names(self) -> list[str]:
        """The pools' names (``pools`` entries may carry BENCH_POOLS settings)."""
        return [p.split(":", 1)[0] for p in self.pools]

    def data_dir(self, name: str) -> Path:
        return Path(self.dir) / name

    def settings(self) -> Settings:
        return Settings.from_env(self.env())

    def save(self) -> None:
        Path(self.dir).mkdir(parents=True, exist_ok=True)
        (Path(self.dir) / "stack.json").write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, directory: Path | None = None) -> Stack | None:
        path = (directory or state_dir()) / "stack.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        data["procs"] = [Proc(**p) for p in data["procs"]]
        known = set(cls.__dataclass_fields__)  # tolerate state files of older versions
        return cls(**{k: v for k, v in data.items() if k in known})

    def agents(self) -> list[Proc]:
        return [p for p in self.procs if p.name.startswith("agent-")]

    def apis(self) -> list[Proc]:
        """The API's processes: ``api``, or ``api-1``..``api-N`` and their ``nginx``."""
        return [p for p in self.procs if p.name in ("api", "nginx") or p.name.startswith("api-")]


def _spawn(
    stack: Stack,
    name: str,
    argv: list[str],
    env: dict[str, str] | None = None,
    port: int | None = None,
    pool: str | None = None,
    pass_fds: tuple[int, ...] = (),
) -> Proc:
    logs = Path(stack.dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{name}.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,
            pass_fds=pass_fds,
        )  # outlives `benchctl local up`
    p = Proc(name, proc.pid, str(log_path), port, pool)
    stack.procs.append(p)
    stack.save()
    return p


def start_azurite(stack: Stack) -> tuple[Proc, Proc]:
    """Azurite's queue and blob services, their data in the stack's ``azurite/``."""
    script = ["node", str(SCRIPTS / "azurite.js")]
    location = str(stack.data_dir("azurite"))
    common = ["--location", location, "--disableTelemetry", "--skipApiVersionCheck", "--silent"]
    queue = ["--queueHost", "127.0.0.1", "--queuePort", str(stack.queue_port), "--loose"]
    blob = ["--blobHost", "127.0.0.1", "--blobPort", str(stack.blob_port)]
    q = _spawn(stack, "azurite", [*script, "queue", *queue, *common], port=stack.queue_port)
    b = _spawn(stack, "azurite-blob", [*script, "blob", *blob, *common], port=stack.blob_port)
    return q, b


def start_cosmos(stack: Stack, env: dict[str, str] | None = None) -> Proc:
    """The Cosmos DB server, its data journaled in the stack's ``cosmosdb/``."""
    argv = ["node", str(SCRIPTS / "cosmosdb-server.js"), "127.0.0.1", str(stack.cosmos_port)]
    return _spawn(
        stack, "cosmosdb", [*argv, str(stack.data_dir("cosmosdb"))], env, port=stack.cosmos_port
    )


def start_emulators(stack: Stack) -> None:
    q, b = start_azurite(stack)
    c = start_cosmos(stack)
    wait_listening("Azurite", q)
    wait_listening("Azurite blob service", b)
    wait_listening("Cosmos DB server", c)
    settings = stack.settings()
    CosmosStore.from_settings(settings).ensure_containers()

    def ensure_pool(pool: str) -> None:
        WorkQueues.from_settings(settings).ensure_pool(pool)

    # Azurite saves its database before it answers each queue created: 8 at a time, the
    # tests' 242 queues took 0.9-1.5 s instead of 1.5-2.3 s one by one.
    with ThreadPoolExecutor(8) as creators:
        list(creators.map(ensure_pool, stack.pool_names))  # re-raises the first error
    BlobArtifacts.connect(settings.blob_uri, local_emulators=True).ensure_container()


def start_api(
    stack: Stack,
    timer_seconds: float = 1.0,
    extra_env: dict[str, str] | None = None,
    *,
    access_log: bool = False,
    name: str = "api",
    port: int | None = None,
    wait: bool = True,
) -> Proc:
    """The API under uvicorn, on the stack's API port (0: any free port, which becomes the
    stack's) or on ``port`` (an instance behind the balancer; 0: any free port);
    ``access_log``: a line per request in its log (benches count requests). The port is
    bound here and handed to uvicorn: a port another server took since it was chosen is a
    StackError ("already in use"), where waiting for an answer on it took that server's for
    the API's (another stack's API, started at the same moment on 7071, while this uvicorn
    was still importing)."""
    listener = listen_on(stack.api_port if port is None else port)
    bound = int(listener.getsockname()[1])
    if port is None and stack.api_port == 0:
        # The stack's API port picked at this bind: one picked before and bound later could
        # be taken meanwhile, as the local port of a connection to the emulators started in
        # between (a CI rehearsal, 2026-11-29: "port 48607 is already in use").
        stack.api_port = bound
    port = bound
    env = {
        **stack.env(),
        **stack.telemetry,
        "BENCH_LOCAL_TIMER_SECONDS": str(timer_seconds),
        **(extra_env or {}),
    }
    env["BENCH_PUBLIC_URL"] = stack.api_url
    # functions.api's app, with the pool scaler, under uvicorn on the socket bound here.
    argv = [sys.executable, "-m", "benchctl.local_api", "--fd", str(listener.fileno())]
    argv += ["--log-level", "info" if access_log else "warning"]
    with listener:  # uvicorn has its own copy
        p = _spawn(stack, name, argv, env, port, pass_fds=(listener.fileno(),))
    if wait:
        wait_api(p)
    return p


def start_apis(
    stack: Stack, timer_seconds: float = 1.0, extra_env: dict[str, str] | None = None
) -> list[Proc]:
    """One uvicorn on the stack's API port, or ``api_instances`` of them behind nginx there,
    whose timers tick only while holding the timers' lease (adapters/timer_lease.py)."""
    if stack.api_instances <= 1:
        return [start_api(stack, timer_seconds, extra_env)]
    local_balancer.ensure_nginx()
    env = {"BENCH_LOCAL_TIMER_LEASE_S": str(local_balancer.TIMER_LEASE_S), **(extra_env or {})}
    procs = [
        start_api(stack, timer_seconds, env, name=f"api-{i}", port=0, wait=False)
        for i in range(1, stack.api_instances + 1)
    ]
    for p in procs:  # started side by side: each takes seconds to import
        wait_api(p)
    ports = [p.port for p in procs if p.port is not None]
    conf_dir = Path(stack.dir) / "nginx"
    argv = local_balancer.nginx_argv(conf_dir, stack.api_port, ports)
    lb = _spawn(stack, "nginx", argv, port=stack.api_port)
    local_balancer.wait_bound(conf_dir, lb)
    wait_api(lb)
    return [*procs, lb]


def start_agent(
    stack: Stack,
    index: int | str,
    *,
    pool: str = "default",
    targets: dict[str, str] | None = None,
    extra: list[str] | None = None,
) -> Proc:
    argv = [sys.executable, "-m", "agent", "--api-url", stack.api_url]
    argv += ["--queue-uri", stack.queue_uri, "--pool", pool, "--agent-id", f"agent-{index}"]
    argv += ["--local-emulators", "--visibility-timeout", str(stack.visibility_timeout)]
    argv += ["--retry-delay", "1", "--heartbeat", str(stack.heartbeat_s)]
    for alias, path in (stack.targets if targets is None else targets).items():
        argv += ["--mount", f"{alias}={path}"]
    return _spawn(stack, f"agent-{index}", argv + (extra or []), stack.telemetry, pool=pool)


def up(
    *,
    agents: int,
    targets: dict[str, str],
    directory: Path | None = None,
    visibility_timeout: int = 30,
    max_deliveries: int = 5,
    timer_seconds: float = 1.0,
    api_env: dict[str, str] | None = None,
    fresh: bool = False,
    max_agents: int | None = None,
    idle_s: float = DEFAULT_IDLE_S,
    heartbeat_s: float = 30.0,
    price: float | None = None,
    telemetry: dict[str, str] | None = None,
    extra_pools: list[str] | None = None,
    api_instances: int = 1,
) -> Stack:
    """Start the stack in ``directory``, on the data kept there (none with ``fresh``);
    ``extra_pools``: more BENCH_POOLS entries (the simulated clients', benchctl.local_sim)."""
    directory = directory or state_dir()
    _refuse_a_second(directory)
    if fresh:
        remove_data(directory)
    for alias, path in targets.items():
        Path(path).mkdir(parents=True, exist_ok=True)
        targets[alias] = str(Path(path).resolve())
    api_port, port_note = api_port_for(directory)
    queue_port, cosmos_port, blob_port = free_ports(3, besides={api_port})
    stack = Stack(
        dir=str(directory),
        queue_port=queue_port,
        cosmos_port=cosmos_port,
        api_port=api_port,
        port_note=port_note,
        blob_port=blob_port,
        targets=targets,
        visibility_timeout=visibility_timeout,
        max_deliveries=max_deliveries,
        heartbeat_s=heartbeat_s,
        telemetry=telemetry or {},
        api_instances=api_instances,
    )
    stack.pools = pool_specs(agents, max_agents, idle_s, price) + (extra_pools or [])
    stack.save()
    # The stack's targets are the API's target registry (GET /api/targets, the bot's
    # `targets`), unless the caller declared more of them (benchctl.local_targets).
    registry = [{"alias": alias, "pool": "default"} for alias in targets]
    api_env = {"BENCH_TARGETS": json.dumps(registry), **(api_env or {})}
    if max_agents is not None:
        api_env[LOCAL_SCALER_SETTING] = str(Path(stack.dir).resolve())
    try:
        start_emulators(stack)
        _start_agents_and_api(stack, agents, timer_seconds, api_env)
    except BaseException:
        down(directory)
        raise
    remember_port(directory, stack.api_port)
    return stack


def _refuse_a_second(directory: Path) -> None:
    existing = Stack.load(directory)
    if existing and any(p.alive() for p in existing.procs):
        raise StackError(
            f"a local stack is already running (state in {directory}); "
            "run `benchctl local down` first"
        )


def _start_agents_and_api(
    stack: Stack, agents: int, timer_seconds: float, api_env: dict[str, str]
) -> None:
    for attempt in range(3):
        # Agents before the API: once the API runs, its pool scaler may start agents
        # too, and the state file then has one writer (they register once it answers).
        for i in range(1, agents + 1):
            start_agent(stack, i)
        try:
            start_apis(stack, timer_seconds, api_env)
            return
        except StackError as e:
            # The port was free when chosen and taken since (another stack starting
            # at the same moment): the agents were told the old address, so again.
            if "already in use" not in str(e) or attempt == 2:
                raise
            for p in stack.agents() + stack.apis():
                stop_proc(p, signal.SIGKILL)
                stack.procs.remove(p)
            taken = stack.api_port
            stack.api_port = free_port()
            stack.port_note = f"port {taken} is in use: the API is on {stack.api_port}"
            stack.save()


def down(directory: Path | None = None) -> list[str]:
    stack = Stack.load(directory)
    if stack is None:
        return []
    stopped = []
    # Agents (and simulated ones) first: they finish with the API still there; then the
    # API (its balancer, then its instances), then storage.
    storage = [p for p in stack.procs if p.name in ("azurite", "azurite-blob", "cosmosdb")]
    apis = sorted(stack.apis(), key=lambda p: p.name != "nginx")
    order = [p for p in stack.procs if p not in apis + storage] + apis + storage
    for p in order:
        if p.alive():
            # A second SIGTERM makes an agent stop at once instead of finishing its item.
            stop_proc(p)
            stopped.append(p.name)
    # Agents the API's pool scaler started meanwhile (benchctl.local_scaler records them in
    # this file): with the API stopped nothing starts more, so stop those too.
    again = Stack.load(Path(stack.dir))
    for p in again.agents() if again is not None else []:
        if p.alive():
            stop_proc(p)
            stopped.append(p.name)
    (Path(stack.dir) / "stack.json").unlink(missing_ok=True)
    return stopped
