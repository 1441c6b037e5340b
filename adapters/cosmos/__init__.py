"""Cosmos DB adapter: one repository per container (core.ports), over one client.

Containers and partition keys (see README, "Storage"):

- runs        /id      point reads by run id dominate (API, agents, timer); listing and the
                       timer's due runs are cross-partition queries.
- items       /run_id  a run's work items and step documents (barrier state) live in one
                       logical partition: read together with one single-partition query.
- results     /run_id  id = item id, so a redelivered item writes one result document.
- aggregates  /run_id  id = <run>.s<step>, so two timers racing store one aggregate.
- series      /series_key  one point per aggregate (id <key>.<run>.s<step>): a series'
                       history is one single-partition query.
- regressions /series_key  id = <key>.<metric>.<first run after the change>: found once.
- schedules   /id      point reads by schedule id; the timer lists them all.
- targets     /id      one lock document per pool and target, with its waiting runs.
- activities  /id      bot activity ids seen (replay protection; TTL in Azure).
- agents      /id      the agent registry: one document per agent id, its heartbeats.
- conversations /id    the Teams bot's stored conversations: a run's (its card, where its
                       result goes) and series subscriptions (adapters/cosmos/conversations.py).
- ticks       /id      each timer's last complete tick (what /api/health reads).
- live        /run_id  id = item id: the last minute of each running item's live samples
                       (core.runs.live); a run's are one single-partition query.
"""

from __future__ import annotations

import warnings
from typing import Any, TypedDict

from azure.core.credentials import TokenCredential
from azure.core.exceptions import AzureError
from azure.cosmos import CosmosClient, PartitionKey
from azure.cosmos import exceptions as cx
from urllib3.exceptions import InsecureRequestWarning

from adapters import counting
from adapters.config import Settings, azure_credential
from adapters.cosmos.agents import CosmosAgents
from adapters.cosmos.base import Container, wrap
from adapters.cosmos.items import CosmosItems
from adapters.cosmos.live import CosmosLive
from adapters.cosmos.monitoring import (
    CosmosActivities,
    CosmosSchedules,
    CosmosSeries,
    CosmosTicks,
)
from adapters.cosmos.results import CosmosResults
from adapters.cosmos.runs import CosmosRuns, CosmosTargets
from adapters.cosmos.threadsafe import per_thread_headers
from adapters.local import COSMOS_EMULATOR_KEY
from adapters.transport import POOL_SIZE, pooled_transport
from core.ports import Store

CONTAINERS: dict[str, str] = {
    "runs": "/id",
    "items": "/run_id",
    "results": "/run_id",
    "aggregates": "/run_id",
    "series": "/series_key",
    "regressions": "/series_key",
    "schedules": "/id",
    "targets": "/id",
    "activities": "/id",
    "agents": "/id",
    "conversations": "/id",
    "ticks": "/id",
    "live": "/run_id",
}


# No request may hang on an unreachable database (issue 12.2): a call ends within
# TIMEOUT_S, after which the API answers 503 naming the database.
TIMEOUT_S = 6


class Bounds(TypedDict):
    """The client's time limits and retries (azure-core's keyword arguments)."""

    timeout: int
    connection_timeout: int
    read_timeout: int
    retry_connect: int
    retry_read: int


BOUNDED = Bounds(
    timeout=TIMEOUT_S, connection_timeout=3, read_timeout=5, retry_connect=0, retry_read=0
)


class CosmosStore(Store):
    """The repositories over one client and database."""

    def __init__(self, client: CosmosClient, database: str) -> None:
        self._client = client
        self._db = client.get_database_client(database)
        c = {
            # The runs' _ts judges their creation (core.runs.commit).
            name: Container(self._db.get_container_client(name), timestamps=name == "runs")
            for name in CONTAINERS
        }
        self._containers = c
        super().__init__(
            runs=CosmosRuns(c["runs"]),
            items=CosmosItems(c["items"]),
            targets=CosmosTargets(c["targets"]),
            results=CosmosResults(c["results"], c["aggregates"]),
            series=CosmosSeries(c["series"], c["regressions"]),
            schedules=CosmosSchedules(c["schedules"]),
            activities=CosmosActivities(c["activities"]),
            agents=CosmosAgents(c["agents"]),
            ticks=CosmosTicks(c["ticks"]),
            live=CosmosLive(c["live"]),
        )

    @classmethod
    def from_settings(cls, settings: Settings, *, pool_size: int = POOL_SIZE) -> CosmosStore:
        credential: str | TokenCredential
        if settings.local_emulators:
            # The local server's certificate is self-signed; Settings.from_env has already
            # refused any non-loopback endpoint in this mode, so the warning is noise here.
            warnings.filterwarnings("ignore", category=InsecureRequestWarning)
            client = CosmosClient(
                settings.cosmos_endpoint,
                credential=COSMOS_EMULATOR_KEY,
                connection_verify=False,
                enable_endpoint_discovery=False,
                transport=pooled_transport(pool_size, verify=False),
                **BOUNDED,
                **counting.hooks("cosmos"),
            )
        else:
            credential = azure_credential(settings.managed_identity_client_id)
            client = CosmosClient(
                settings.cosmos_endpoint,
                credential=credential,
                transport=pooled_transport(pool_size),
                **BOUNDED,
                **counting.hooks("cosmos"),
            )
        # The API's worker threads share this client: see adapters/cosmos/threadsafe.py.
        per_thread_headers(client)
        return cls(client, settings.cosmos_database)

    def container(self, name: str) -> Container:
        """A container as raw documents (local tooling and tests of the storage itself)."""
        return self._containers[name]

    @staticmethod
    def partition_field(container: str) -> str:
        """The field a document of ``container`` is partitioned by (``run_id``, ``id``...)."""
        return CONTAINERS[container].lstrip("/")

    def count(self, container: str, where: str, value: object) -> int:
        """How many documents of ``container`` match ``where`` (one fixed clause whose
        parameter is ``@v``)."""
        sql = f"SELECT VALUE COUNT(1) FROM c WHERE {where}"  # noqa: S608 (fixed clauses only)
        try:
            found = self._containers[container].proxy.query_items(
                sql, parameters=[{"name": "@v", "value": value}], enable_cross_partition_query=True
            )
            counts: list[Any] = list(found)  # VALUE COUNT: plain numbers, one per partition
            return sum(int(n) for n in counts)
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise wrap(e, f"count on {container}") from e

    def ensure_containers(self) -> None:
        """Create the database and containers (locally; in Azure the Bicep creates them)."""
        db = self._client.create_database_if_not_exists(self._db.id)
        for name, pk in CONTAINERS.items():
            db.create_container_if_not_exists(name, partition_key=PartitionKey(pk))

    def ping(self) -> None:
        try:
            self._db.read()
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise wrap(e, "database") from e
