"""The API as the local stack serves it (``uvicorn --factory benchctl.local_api:create_app``,
benchctl.localstack.start_api): functions.api's app, given the stack's pool scaler
(benchctl.local_scaler: an elastic pool's capacity is its number of agent processes) when
BENCH_LOCAL_SCALER_DIR names the stack. The scaler is handed to the server from here, the
local stack's side, so the server never imports the CLI."""

from __future__ import annotations

import logging
from pathlib import Path

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
