"""``python -m agent`` / ``benchagent``: run a benchmark agent on a client VM."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from dataclasses import dataclass
from types import FrameType

from adapters.config import azure_credential
from adapters.queue import WorkQueues
from agent import tracing
from agent.api_client import ApiClient
from agent.beacon import Beacon
from agent.config import AgentConfig, MountSpec
from agent.mounts import MountWatch
from agent.worker import Worker


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="benchagent", description=__doc__)
    p.add_argument("--config", help="JSON file with the agent's settings")
    p.add_argument("--api-url")
    p.add_argument("--queue-uri")
    p.add_argument("--pool")
    p.add_argument("--agent-id")
    p.add_argument(
        "--api-key",
        help="this agent's API key (else $BENCH_AGENT_API_KEY); its name must be the agent id",
    )
    p.add_argument(
        "--mount",
        action="append",
        default=[],
        metavar="ALIAS=PATH[,fstype=TYPE][,source=SOURCE]",
        help="a mount alias and its directory (repeatable); with fstype (and source), items "
        "run on it only while PATH is a mount point of that type (from that source)",
    )
    p.add_argument("--visibility-timeout", type=int)
    p.add_argument("--retry-delay", type=int, dest="retry_delay_s")
    p.add_argument("--idle-max", type=float, dest="idle_max_s")
    p.add_argument("--local-emulators", action="store_true", default=None)
    p.add_argument(
        "--imds",
        action="store_true",
        default=None,
        help="read the VM size from Azure's instance metadata",
    )
    p.add_argument("--diskspd", dest="diskspd_binary", help="DiskSpd binary (Windows agents)")
    p.add_argument("--fio", dest="fio_binary", help="fio binary (default: fio on the PATH)")
    p.add_argument(
        "--heartbeat",
        type=float,
        dest="heartbeat_s",
        help="seconds between registry heartbeats (default 30)",
    )
    p.add_argument(
        "--no-live",
        dest="live",
        action="store_false",
        default=None,
        help="do not relay fio's status output with the heartbeats (no live view)",
    )
    p.add_argument("--once", action="store_true", help="poll once and exit")
    p.add_argument("--max-items", type=int)
    p.add_argument("--log-level", default="INFO")
    return p.parse_args(argv)


@dataclass(frozen=True)
class Agent:
    """An agent ready to poll: its worker and registry heartbeat (``serve`` runs it)."""

    config: AgentConfig
    worker: Worker
    api: ApiClient
    once: bool = False
    max_items: int | None = None

    def serve(self) -> int:
        logging.getLogger("agent").info(
            "agent %s polling pool %s with mounts %s",
            self.config.agent_id,
            self.config.pool,
            {
                alias: spec.model_dump(exclude_none=True)
                for alias, spec in self.config.mounts.items()
            },
        )
        beacon = Beacon(self.config, self.api, self.worker.host).start()
        self.worker.beacon = beacon
        try:
            self.worker.work(once=self.once, max_items=self.max_items)
        finally:
            beacon.stop()
        return 0


def prepare(argv: list[str] | None = None, *, log_to_stderr: bool = True) -> Agent | int:
    """Read the configuration and connect: the agent, or the exit status (2) of a bad
    configuration, already explained on stderr. ``python -m agent`` and the Windows service
    (agent.winservice) both start here."""
    a = parse_args(argv)
    if log_to_stderr:
        logging.basicConfig(
            level=a.log_level,
            stream=sys.stderr,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    else:
        logging.getLogger().setLevel(a.log_level)
    # The SDK logs every HTTP exchange at INFO; one poll a second would drown the agent's log.
    logging.getLogger("azure").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    mounts: dict[str, MountSpec] = {}
    for text in a.mount:
        try:
            alias, spec = MountSpec.from_flag(text)
        except ValueError as e:
            print(f"benchagent: {e}", file=sys.stderr)
            return 2
        mounts[alias] = spec
    overrides = {
        "api_url": a.api_url,
        "queue_uri": a.queue_uri,
        "pool": a.pool,
        "agent_id": a.agent_id,
        "api_key": a.api_key or os.environ.get("BENCH_AGENT_API_KEY") or None,
        "visibility_timeout": a.visibility_timeout,
        "retry_delay_s": a.retry_delay_s,
        "idle_max_s": a.idle_max_s,
        "local_emulators": a.local_emulators,
        "imds": a.imds,
        "diskspd_binary": a.diskspd_binary,
        "fio_binary": a.fio_binary,
        "heartbeat_s": a.heartbeat_s,
        "live": a.live,
        "mounts": mounts or None,
    }
    try:
        config = AgentConfig.load(a.config, overrides)
    except (TypeError, ValueError, OSError) as e:
        print(f"benchagent: bad configuration: {e}", file=sys.stderr)
        return 2
    problems = MountWatch(config.mounts).check()
    if not any(p is None for p in problems.values()):
        # Nothing to serve: taking items would only fail them. (With some usable mounts
        # the agent runs, logs the others and re-checks them before every poll.)
        why = "; ".join(p for p in problems.values() if p) or "no mount is configured"
        print(f"benchagent: no usable mount: {why}", file=sys.stderr)
        return 2
    # Tokens are cached by the API client (azure-core's BearerTokenCredentialPolicy).
    credential = azure_credential(config.managed_identity_client_id) if config.api_scope else None
    try:
        api = ApiClient(
            config.api_url, credential=credential, scope=config.api_scope, api_key=config.api_key
        )
    except ValueError as e:  # a token over plain http to another host
        print(f"benchagent: bad configuration: {e}", file=sys.stderr)
        return 2
    queues = WorkQueues.connect(
        config.queue_uri,
        local_emulators=config.local_emulators,
        client_id=config.managed_identity_client_id,
    )
    worker = Worker(config, queues, api)
    tracing.setup(  # where spans go: adapters/telemetry.py
        config.agent_id, config.appinsights_connection_string, config.managed_identity_client_id
    )
    return Agent(config, worker, api, once=a.once, max_items=a.max_items)


def main(argv: list[str] | None = None) -> int:
    agent = prepare(argv)
    if isinstance(agent, int):
        return agent
    worker = agent.worker

    def on_signal(signum: int, _: FrameType | None) -> None:
        logging.getLogger("agent").info(
            "signal %d: %s",
            signum,
            "stopping now" if worker.stop_after_current.is_set() else "finishing the current item",
        )
        worker.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return agent.serve()


if __name__ == "__main__":
    sys.exit(main())
