"""Builds the service from settings once per process, on first use, so importing the app
(e.g. by the Functions host indexing functions) opens no connection."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from adapters.blob import BlobArtifacts
from adapters.config import Settings, azure_credential
from adapters.cosmos import CosmosStore
from adapters.notifier import WebhookNotifier
from adapters.queue import WorkQueues
from core.chat.announce import Announcer
from core.chat.bot import Bot
from core.fleet.autoscaler import Autoscaler
from core.fleet.scaling import PoolScaler
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
def autoscaler() -> Autoscaler | None:
    """Elastic pools' scaling, when there are elastic pools and a scaler for them."""
    s = settings()
    if not any(p.elastic for p in s.pool_configs):
        return None
    scaler: PoolScaler
    if s.local_scaler_dir:
        from benchctl.local_scaler import LocalScaler  # the local stack only

        scaler = LocalScaler(Path(s.local_scaler_dir))
    elif s.azure_subscription_id and s.azure_resource_group:
        from adapters.azure_scaler import AzureScaler, scale_sets

        scaler = AzureScaler(
            azure_credential(s.managed_identity_client_id),
            s.azure_subscription_id,
            s.azure_resource_group,
            scale_sets(s.pool_configs),
        )
    else:
        return None
    svc = service()
    svc.fleet.scaler = scaler
    return Autoscaler(svc.fleet, svc.store.runs, scaler)


@cache
def bot() -> Bot:
    s = settings()
    doors = {"bot-teams": bool(s.teams_webhook_url), "bot-webhook": bool(s.webhook_url)}
    doors["bot-webhook"] = doors["bot-webhook"] and bool(s.webhook_secret)  # posts are signed
    return Bot(
        service(),
        scheduler(),
        monitor(),
        targets=list(s.targets),
        public_url=s.public_url,
        result_doors=frozenset(d for d, configured in doors.items() if configured),
    )


@cache
def scheduler() -> Scheduler:
    return Scheduler(store(), service())
