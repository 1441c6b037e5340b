"""The service's parts, built from settings on first use, so creating the app (e.g. when
the Functions host indexes it) opens no connection.

One :class:`Services` per app: ``create_app(services)`` keeps it in ``app.state`` and the
routes receive its parts as FastAPI dependencies (functions/params.py); the timers take it
as an argument. What an app is built with (the local stack's pool scaler) is given to the
constructor, never set afterwards. Without one, an app and the Functions timers share the
process's default, :func:`current` (built from the environment).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import cache, cached_property
from typing import TYPE_CHECKING

from azure.identity import ManagedIdentityCredential

from adapters.archive import Archive
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
from core.models.views import RunView
from core.monitoring.monitor import Monitor
from core.monitoring.scheduler import Scheduler
from core.ports import Notifier
from core.runs.service import RunService

if TYPE_CHECKING:
    from adapters.bot_connector import BotConnector
    from functions.teams_bot import TeamsHost

log = logging.getLogger(__name__)


def _run_view(service: RunService) -> Callable[[str], RunView]:
    """A run's view as the API serves it: the chat's cards show it."""
    return lambda run_id: service.get_run(run_id)


class Services:
    """The parts of one deployment of the service, each built once, when first used."""

    def __init__(self, settings: Settings, *, local_scaler: PoolScaler | None = None) -> None:
        self.settings = settings
        # The local stack's scaler (its agent processes), given by the app the stack serves
        # (benchctl.local_api): the server never imports the CLI.
        self.local_scaler = local_scaler
        self._teams_lock = threading.Lock()

    @cached_property
    def store(self) -> CosmosStore:
        return CosmosStore.from_settings(self.settings)

    @cached_property
    def queues(self) -> WorkQueues:
        return WorkQueues.from_settings(self.settings)

    @cached_property
    def artifacts(self) -> BlobArtifacts:
        s = self.settings
        return BlobArtifacts.connect(
            s.blob_uri, local_emulators=s.local_emulators, client_id=s.managed_identity_client_id
        )

    @cached_property
    def archive(self) -> Archive:
        return Archive(self.store, self.artifacts)

    @cached_property
    def monitor(self) -> Monitor:
        s = self.settings
        return Monitor(
            self.store, self.notifier, gate_pct=s.gate_pct, min_magnitude_pct=s.min_magnitude_pct
        )

    @cached_property
    def notifier(self) -> Notifier:
        # Regressions go to the webhooks and to the Teams conversations subscribed to them.
        return ChatNotifier(WebhookNotifier.from_settings(self.settings), self._threads)

    def _threads(self) -> Threads | None:
        return self.threads

    @cached_property
    def service(self) -> RunService:
        s = self.settings
        svc = RunService(
            self.store,
            self.queues,
            self.artifacts,
            max_deliveries=s.max_deliveries,
            pools=s.pools,
            pool_configs=s.pool_configs,
            monitor=self.monitor,
            targets=list(s.targets),
            # Elastic pools' capacity, when there are elastic pools and a scaler for them.
        )
        svc.fleet.scaler = self.scaler
        # A chat-requested run's result goes back to its chat when the run is finalized.
        svc.lifecycle.on_finished = Announcer(
            _run_view(svc), self.notifier, public_url=s.public_url, threads=self._threads
        )
        return svc

    @cached_property
    def scaler(self) -> PoolScaler | None:
        """Elastic pools' scaler: the local stack's, or the Azure scale sets'."""
        s = self.settings
        if not any(p.elastic for p in s.pool_configs):
            return None
        if s.local_scaler_dir:
            if self.local_scaler is None:  # served by functions.api, not benchctl.local_api
                log.warning("BENCH_LOCAL_SCALER_DIR is set but no local scaler was given")
            return self.local_scaler
        if s.azure_subscription_id and s.azure_resource_group:
            from adapters.azure_scaler import AzureScaler, scale_sets

            return AzureScaler(
                azure_credential(s.managed_identity_client_id),
                s.azure_subscription_id,
                s.azure_resource_group,
                scale_sets(s.pool_configs),
            )
        return None

    @cached_property
    def autoscaler(self) -> Autoscaler | None:
        scaler = self.scaler
        if scaler is None:
            return None
        return Autoscaler(self.service.fleet, self.store.runs, scaler)

    @cached_property
    def bot(self) -> Bot:
        s = self.settings
        return Bot(
            self.service,
            self.scheduler,
            self.monitor,
            targets=list(s.targets),
            public_url=s.public_url,
            result_doors=result_doors(s),
        )

    @cached_property
    def scheduler(self) -> Scheduler:
        return Scheduler(self.store, self.service)

    @cached_property
    def connector(self) -> BotConnector | None:
        """The Teams bot's Bot Connector, when the bot is configured (BENCH_BOT_APP_ID)."""
        s = self.settings
        if not (s.bot_app_id and s.bot_tenant_id):
            return None
        # The SDK: only where there is a bot (functions/messages.py).
        from adapters.bot_auth import default_issuers
        from adapters.bot_connector import BotConnector

        issuers = dict(s.bot_issuers) or default_issuers(s.bot_tenant_id)
        return BotConnector(s.bot_app_id, s.bot_tenant_id, issuers, local=s.local_emulators)

    @cached_property
    def threads(self) -> Threads | None:
        sender = self.connector
        if sender is None:
            return None
        conversations = CosmosConversations(self.store.container("conversations"))
        return Threads(
            conversations,
            sender,
            _run_view(self.service),
            public_url=self.settings.public_url,
            finished_ttl_s=self.settings.retention.finished_delivery_ttl(),
        )

    def teams_host(self) -> TeamsHost | None:
        """The Teams bot (functions/teams_bot.py), built once: by the first activity or by
        the start-up's warm-up, whichever comes first (they may race: the lock makes it
        one)."""
        with self._teams_lock:
            return self._teams_host

    @cached_property
    def _teams_host(self) -> TeamsHost | None:
        s = self.settings
        sender, kept = self.connector, self.threads
        if sender is None or kept is None:
            return None
        from functions.teams_bot import TeamsHost, build_app

        if s.api_app_id:
            directory = GraphRoles(
                s.graph_url, s.api_app_id, ManagedIdentityCredential(client_id=s.bot_app_id)
            ).lookup
        else:
            directory = _no_roles  # no registration to read roles from: the default role only
        teams = TeamsBot(self.bot, kept, directory, self.store, default_role=s.default_role)
        return TeamsHost(sender, build_app(sender, teams, kept), teams, kept)


@cache
def current() -> Services:
    """The process's default parts, from the environment (the Functions app and its
    timers; an app created without parts of its own)."""
    return Services(Settings.from_env())


def result_doors(s: Settings) -> frozenset[str]:
    """The chat doors a finished run's card can be posted back through: Teams' Workflows
    webhook, the signed generic webhook, and the Teams bot, which posts into the
    conversation the run came from (core.chat.threads) wherever it is configured
    (the connector's condition, without importing the SDK)."""
    doors = {
        "bot-teams": bool(s.teams_webhook_url),
        "bot-webhook": bool(s.webhook_url and s.webhook_secret),  # its posts are signed
        BOT_DOOR: bool(s.bot_app_id and s.bot_tenant_id),
    }
    return frozenset(d for d, configured in doors.items() if configured)


def _no_roles(object_id: str) -> DirectoryEntry:
    return DirectoryEntry("", ())
