"""Builds the service from settings once per process, on first use, so importing the app
(e.g. by the Functions host indexing functions) opens no connection."""

from __future__ import annotations

from functools import cache

from adapters.blob import BlobArtifacts
from adapters.config import Settings
from adapters.cosmos import CosmosStore
from adapters.notifier import WebhookNotifier
from adapters.queue import WorkQueues
from core.chat.announce import Announcer
from core.chat.bot import Bot
from core.monitoring.monitor import Monitor
from core.monitoring.scheduler import Scheduler
from core.ports import Notifier
from core.runs.service import RunService


@cache
def settings() -> Settings:
    return Settings.from_env()


@cache
def store() -> CosmosStore:
    return CosmosStore.from_settings(settings())


@cache
def queues() -> WorkQueues:
    return WorkQueues.from_settings(settings())


@cache
def artifacts() -> BlobArtifacts:
    s = settings()
    return BlobArtifacts.connect(
        s.blob_uri, local_emulators=s.local_emulators, client_id=s.managed_identity_client_id
    )


@cache
def monitor() -> Monitor:
    s = settings()
    return Monitor(store(), notifier(), gate_pct=s.gate_pct, min_magnitude_pct=s.min_magnitude_pct)


@cache
def notifier() -> Notifier:
    return WebhookNotifier.from_settings(settings())


@cache
def service() -> RunService:
    s = settings()
    svc = RunService(
        store(),
        queues(),
        artifacts(),
        max_deliveries=s.max_deliveries,
        pools=s.pools,
        pool_configs=s.pool_configs,
        monitor=monitor(),
        targets=list(s.targets),
    )
    # A chat-requested run's result goes back to its chat when the run is finalized.
    svc.lifecycle.on_finished = Announcer(svc.get_run, notifier(), public_url=s.public_url)
    return svc


@cache
def bot() -> Bot:
    s = settings()
    return Bot(service(), scheduler(), monitor(), targets=list(s.targets), public_url=s.public_url)


@cache
def scheduler() -> Scheduler:
    return Scheduler(store(), service())
