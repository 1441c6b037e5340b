"""``python -m simagent``: run N simulated clients against a running stack.

Simulated clients run no fio and serve no real target: they exist to measure the control
plane at scale (bench/scale.py) and to test it (tests/test_sim_agents.py). Use them only
on a pool of their own: a real run's items taken by one would carry made-up figures.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

from adapters.storage import READ_TIMEOUT_S
from simagent.figures import DeclaredRate
from simagent.fleet import FLEET_ITEM_BEATS_PER_S, FLEET_REGISTRY_BEATS_PER_S, Fleet


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m simagent", description=__doc__)
    p.add_argument("--api-url", required=True)
    p.add_argument("--queue-uri", required=True)
    p.add_argument("--pool", required=True)
    p.add_argument("--count", type=int, required=True, help="how many simulated clients")
    p.add_argument("--prefix", default="sim", help="agent ids are PREFIX-1 ... PREFIX-N")
    p.add_argument("--target", action="append", default=[], help="a target alias it serves")
    p.add_argument("--iops", type=int, default=1000, help="each client's I/Os per second")
    p.add_argument(
        "--latency-us", type=float, default=100.0, help="each I/O's completion latency, µs"
    )
    p.add_argument("--visibility-timeout", type=int, default=60)
    p.add_argument("--retry-delay", type=int, default=5)
    p.add_argument("--idle-min", type=float, default=0.25)
    p.add_argument("--idle-max", type=float, default=0.25)
    p.add_argument("--heartbeat", type=float, default=30.0, help="registry heartbeat, s")
    p.add_argument(
        "--registry-beats-per-s",
        type=float,
        default=FLEET_REGISTRY_BEATS_PER_S,
        help="the fleet's registry beats, all clients together, at most this often",
    )
    p.add_argument(
        "--item-beats-per-s",
        type=float,
        default=FLEET_ITEM_BEATS_PER_S,
        help="held items' heartbeats, all clients together, at most this often",
    )
    p.add_argument(
        "--queue-timeout", type=int, default=READ_TIMEOUT_S, help="queue calls' read timeout, s"
    )
    p.add_argument("--threads", type=int, default=64, help="threads making the calls")
    p.add_argument("--records", type=Path, help="append one JSON line per item here")
    p.add_argument("--log-level", default="WARNING")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    logging.basicConfig(
        level=a.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("azure").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    if a.count < 1 or not a.target:
        print("simagent: --count must be at least 1 and --target given", file=sys.stderr)
        return 2
    fleet = Fleet(
        api_url=a.api_url,
        queue_uri=a.queue_uri,
        pool=a.pool,
        count=a.count,
        rate=DeclaredRate(a.iops, round(a.latency_us * 1000)),
        targets=a.target,
        prefix=a.prefix,
        api_key=os.environ.get("BENCH_AGENT_API_KEY") or None,
        visibility_timeout=a.visibility_timeout,
        retry_delay_s=a.retry_delay,
        idle_min_s=a.idle_min,
        idle_max_s=a.idle_max,
        heartbeat_s=a.heartbeat,
        registry_beats_per_s=a.registry_beats_per_s,
        item_beats_per_s=a.item_beats_per_s,
        queue_timeout_s=a.queue_timeout,
        threads=a.threads,
        records=a.records,
    )
    return asyncio.run(_serve(fleet))


async def _serve(fleet: Fleet) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)  # the clients finish their current items
    await fleet.run(stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
