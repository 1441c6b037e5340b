"""The API as the local stack serves it (``python -m benchctl.local_api --fd N``: uvicorn on
the socket benchctl.localstack.start_api bound): functions.api's app, given the stack's pool scaler
(benchctl.local_scaler: an elastic pool's capacity is its number of agent processes) when
BENCH_LOCAL_SCALER_DIR names the stack. The scaler is handed to the server from here, the
local stack's side, so the server never imports the CLI."""

from __future__ import annotations

import argparse
import logging
import socket
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from adapters.config import Settings
from benchctl.local_scaler import LocalScaler
from functions.api import create_app as create_api
from functions.context import Services


def create_app() -> FastAPI:
    settings = Settings.from_env()
    if settings.local_timer_lease_s > 0:
        # One of several instances: its log says when it took or lost the timers' lease and
        # each tick it ran (the tests count them per instance).
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
        for name in ("functions.timers", "adapters.timer_lease"):
            logging.getLogger(name).addHandler(handler)
            logging.getLogger(name).setLevel(logging.INFO)
    directory = settings.local_scaler_dir
    scaler = LocalScaler(Path(directory)) if directory else None
    return create_api(Services(settings, local_scaler=scaler))


def serve(fd: int, log_level: str) -> None:
    """uvicorn on the listening socket the stack bound (``fd``), as its own family: uvicorn's
    ``--fd`` labels it AF_UNIX, so asyncio left Nagle's algorithm on for every connection
    and each answer waited for the client's delayed ACK (50 ms a POST, against 5 ms;
    Schemathesis' coverage phase took 376 s, against 78 s)."""
    listener = socket.socket(fileno=fd)  # family, type and protocol as bound: TCP
    config = uvicorn.Config("benchctl.local_api:create_app", factory=True, log_level=log_level)
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args()
    serve(args.fd, args.log_level)
