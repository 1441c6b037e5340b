"""Builds the service from settings once per process, on first use, so importing the app
(e.g. by the Functions host indexing functions) opens no connection."""

from __future__ import annotations

import logging
import threading
from functools import cache
from typing import TYPE_CHECKING

from azure.identity import ManagedIdentityCredential

from adapters.blob import BlobArtifacts
from adapters.config import Settings, azure_credential
from adapters.cosmos import CosmosStore
from adapters.cosmos.conversations import CosmosConversations
from adapters.graph_roles import GraphRoles
from adapters.notifier import WebhookNotifier
from adapters.queue import WorkQueues
from core.chat.announce import Announcer
from core.chat.bot import Bot
from core.chat.identity import BOT_DOOR, DirectoryEntry
from core.chat.teams_bot import TeamsBot
from core.chat.threads import ChatNotifier, Threads
from core.fleet.autoscaler import Autoscaler
from core.fleet.scaling import PoolScaler
from core.monitoring.monitor import Monitor
from core.monitoring.scheduler import Scheduler
from core.ports import Notifier
from core.runs.service import RunService

if TYPE_CHECKING:
    from adapters.bot_connector import BotConnector
    from functions.teams_bot import TeamsHost

log = logging.getLogger(__name__)


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
    # Regressions go to the webhooks and to the Teams conversations subscribed to them.
    return ChatNotifier(WebhookNotifier.from_settings(settings()), threads)


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
    svc.lifecycle.on_finished = Announcer(
        svc.run_doc, notifier(), public_url=s.public_url, threads=threads
    )
    return svc


# The local stack's scaler (its agent processes), handed over by the app the stack serves
# (benchctl.local_api): the server never imports the CLI.
_local_scaler: PoolScaler | None = None


def use_local_scaler(scaler: PoolScaler) -> None:
    """Scale elastic pools with the local stack's ``scaler`` (BENCH_LOCAL_SCALER_DIR)."""
    global _local_scaler
    _local_scaler = scaler
    autoscaler.cache_clear()


@cache
def autoscaler() -> Autoscaler | None:
    """Elastic pools' scaling, when there are elastic pools and a scaler for them."""
    s = settings()
    if not any(p.elastic for p in s.pool_configs):
        return None
    scaler: PoolScaler
    if s.local_scaler_dir:
        if _local_scaler is None:  # served by functions.api, not benchctl.local_api
            log.warning("BENCH_LOCAL_SCALER_DIR is set but no local scaler was given")
            return None
        scaler = _local_scaler
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
    return Bot(
        service(),
        scheduler(),
        monitor(),
        targets=list(s.targets),
        public_url=s.public_url,
        result_doors=result_doors(s),
    )


def result_doors(s: Settings) -> frozenset[str]:
    """The chat doors a finished run's card can be posted back through: Teams' Workflows
    webhook, the signed generic webhook, and the Teams bot, which posts into the
    conversation the run came from (core.chat.threads) wherever it is configured
    (connector()'s condition, without importing the SDK)."""
    doors = {
        "bot-teams": bool(s.teams_webhook_url),
        "bot-webhook": bool(s.webhook_url and s.webhook_secret),  # its posts are signed
        BOT_DOOR: bool(s.bot_app_id and s.bot_tenant_id),
    }
    return frozenset(d for d, configured in doors.items() if configured)


@cache
def scheduler() -> Scheduler:
    return Scheduler(store(), service())


@cache
def connector() -> BotConnector | None:
    """The Teams bot's Bot Connector, when the bot is configured (BENCH_BOT_APP_ID)."""
    s = settings()
    if not (s.bot_app_id and s.bot_tenant_id):
        return None
    # The SDK: only where there is a bot (functions/messages.py).
    from adapters.bot_auth import default_issuers
    from adapters.bot_connector import BotConnector

    issuers = dict(s.bot_issuers) or default_issuers(s.bot_tenant_id)
    return BotConnector(s.bot_app_id, s.bot_tenant_id, issuers, local=s.local_emulators)


@cache
def threads() -> Threads | None:
    sender = connector()
    if sender is None:
        return None
    conversations = CosmosConversations(store().container("conversations"))
    return Threads(
        conversations,
        sender,
        service().run_doc,
        public_url=settings().public_url,
        finished_ttl_s=settings().retention.finished_delivery_ttl(),
    )


_teams_lock = threading.Lock()


def teams_host() -> TeamsHost | None:
    """The Teams bot (functions/teams_bot.py), built once: by the first activity or by the
    start-up's warm-up, whichever comes first (they may race: the lock makes it one)."""
    with _teams_lock:
        return _teams_host()


@cache
def _teams_host() -> TeamsHost | None:
    s = settings()
    sender, kept = connector(), threads()
    if sender is None or kept is None:
        return None
    from functions.teams_bot import TeamsHost, build_app

    if s.api_app_id:
        directory = GraphRoles(
            s.graph_url, s.api_app_id, ManagedIdentityCredential(client_id=s.bot_app_id)
        ).lookup
    else:
        directory = _no_roles  # no registration to read roles from: the default role only
    teams = TeamsBot(
        bot(),
        kept,
        directory,
        store(),
        default_role=s.default_role,
    )
    return TeamsHost(sender, build_app(sender, teams, kept), teams, kept)


def _no_roles(object_id: str) -> DirectoryEntry:
    return DirectoryEntry("", ())
