"""Cosmos DB adapter. Containers and partition keys (see README, "Storage"):

- runs        /id      point reads by run id dominate (API, agents, timer); listing is a
                       cross-partition query, fine at this volume.
- items       /run_id  a run's work items and step documents (barrier state) live in one
                       logical partition: read together with one single-partition query.
- results     /run_id  id = item id, so a redelivered item writes one result document.
- aggregates  /run_id  id = <run>.s<step>, so two timers racing store one aggregate.
- series      /series_key  one point per aggregate (id <key>.<run>.s<step>): a series'
                       history is one single-partition query.
- regressions /series_key  id = <key>.<metric>.<first run after the change>: found once.
- schedules   /id      point reads by schedule id; the timer lists them all.
"""

from __future__ import annotations

import base64
import json
import logging
import warnings
from typing import Any

import requests
from azure.core import MatchConditions
from azure.core.credentials import TokenCredential
from azure.core.exceptions import AzureError
from azure.core.pipeline.transport import RequestsTransport
from azure.cosmos import ContainerProxy, CosmosClient, PartitionKey
from azure.cosmos import exceptions as cx
from requests.adapters import HTTPAdapter
from urllib3.exceptions import InsecureRequestWarning
from urllib3.util.retry import Retry

from adapters.config import Settings, azure_credential
from adapters.local import COSMOS_EMULATOR_KEY
from core.errors import Conflict, NotFound, StoreUnavailable, TooLarge

log = logging.getLogger(__name__)
Doc = dict[str, Any]
# Azure Cosmos DB's maximum item size (service quotas: "Maximum size of an item: 2 MB",
# measured on the item's JSON). The local server has no such limit; the adapter holds
# it so tests see what Azure would refuse.
MAX_DOCUMENT_BYTES = 2 * 1024 * 1024


def _check_size(container: str, doc: Doc) -> None:
    size = len(json.dumps(doc, separators=(",", ":")).encode())
    if size > MAX_DOCUMENT_BYTES:
        raise TooLarge(
            f"{container}/{doc.get('id')} is {size:,} bytes; Cosmos DB takes at most "
            f"{MAX_DOCUMENT_BYTES:,}"
        )


CONTAINERS: dict[str, str] = {
    "runs": "/id",
    "items": "/run_id",
    "results": "/run_id",
    "aggregates": "/run_id",
    "series": "/series_key",
    "regressions": "/series_key",
    "schedules": "/id",
    "targets": "/id",  # one lock document per pool and target: one run at a time
    "activities": "/id",  # bot activity ids seen (replay protection; TTL in Azure)
}


def _clean(doc: Any) -> Doc:
    """Drop Cosmos system properties except the ETag, which compare-and-swap needs."""
    return {k: v for k, v in dict(doc).items() if not k.startswith("_") or k == "_etag"}


def _wrap(e: Exception, what: str) -> Exception:
    if isinstance(e, cx.CosmosResourceNotFoundError):
        return NotFound(what)
    if isinstance(e, cx.CosmosResourceExistsError):
        return Conflict(f"{what} already exists")
    if isinstance(e, cx.CosmosAccessConditionFailedError):
        return Conflict(f"{what} changed concurrently")
    return StoreUnavailable(f"{what}: {e}")


def _pooled_transport(size: int) -> RequestsTransport:
    """Keep as many connections as the API has worker threads. With requests' default of
    10, concurrent calls kept discarding connections and opening new TLS ones (measured:
    most of the API's CPU went to TLS set-up with 16 agents polling)."""
    session = requests.Session()
    adapter = HTTPAdapter(
        pool_connections=4,
        pool_maxsize=size,
        max_retries=Retry(total=False, redirect=False, raise_on_status=False),  # SDK retries
    )
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return RequestsTransport(session=session, session_owner=False)


class CosmosStore:
    def __init__(self, client: CosmosClient, database: str) -> None:
        self._client = client
        self._db = client.get_database_client(database)
        self._c: dict[str, ContainerProxy] = {
            n: self._db.get_container_client(n) for n in CONTAINERS
        }

    @classmethod
    def from_settings(cls, settings: Settings, *, pool_size: int = 64) -> CosmosStore:
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
                transport=_pooled_transport(pool_size),
            )
        else:
            credential = azure_credential(settings.managed_identity_client_id)
            client = CosmosClient(
                settings.cosmos_endpoint,
                credential=credential,
                transport=_pooled_transport(pool_size),
            )
        return cls(client, settings.cosmos_database)

    def ensure_containers(self) -> None:
        """Create the database and containers (locally; in Azure the Bicep creates them)."""
        db = self._client.create_database_if_not_exists(self._db.id)
        for name, pk in CONTAINERS.items():
            db.create_container_if_not_exists(name, partition_key=PartitionKey(pk))

    def ping(self) -> None:
        try:
            self._db.read()
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise _wrap(e, "database") from e

    # ---- generic ----------------------------------------------------------------------

    def _create(self, container: str, doc: Doc) -> Doc:
        _check_size(container, doc)
        try:
            return _clean(self._c[container].create_item(doc))
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise _wrap(e, f"{container}/{doc.get('id')}") from e

    def _read(self, container: str, id_: str, pk: str) -> Doc:
        # A single-partition query instead of a point read: the local Cosmos DB server
        # answers 500, not 404, for a missing document. The query costs a few RU more in
        # Azure and behaves the same on both, so tests cover the code that runs there.
        field = CONTAINERS[container].lstrip("/")
        rows = self._query(
            container,
            f"SELECT * FROM c WHERE c.{field} = @pk AND c.id = @id",  # noqa: S608 - fixed name
            [{"name": "@pk", "value": pk}, {"name": "@id", "value": id_}],
            pk=pk,
        )
        if not rows:
            raise NotFound(f"{container}/{id_}")
        return rows[0]

    def _replace(self, container: str, doc: Doc) -> Doc:
        _check_size(container, doc)
        try:
            return _clean(
                self._c[container].replace_item(
                    doc["id"], doc, etag=doc["_etag"], match_condition=MatchConditions.IfNotModified
                )
            )
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise _wrap(e, f"{container}/{doc.get('id')}") from e

    def _query(
        self, container: str, sql: str, params: list[dict[str, Any]], pk: str | None = None
    ) -> list[Doc]:
        try:
            if pk is None:
                it = self._c[container].query_items(
                    sql, parameters=params, enable_cross_partition_query=True
                )
            else:
                it = self._c[container].query_items(sql, parameters=params, partition_key=pk)
            return [_clean(d) for d in it]
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise _wrap(e, f"query on {container}") from e

    def _create_once(self, container: str, doc: Doc) -> bool:
        try:
            self._create(container, doc)
            return True
        except Conflict:
            return False

    # ---- runs -------------------------------------------------------------------------

    def create_run(self, doc: Doc) -> Doc:
        return self._create("runs", doc)

    def get_run(self, run_id: str) -> Doc:
        return self._read("runs", run_id, run_id)

    def replace_run(self, doc: Doc) -> Doc:
        return self._replace("runs", doc)

    def query_runs(
        self,
        *,
        target: str | None,
        state: str | None,
        tag: tuple[str, str] | None,
        limit: int,
        continuation: str | None,
    ) -> tuple[list[Doc], str | None]:
        # Only fixed clauses are joined; every value travels as a query parameter.
        where: list[str] = []
        params: list[dict[str, object]] = []
        if target:
            where.append("ARRAY_CONTAINS(c.targets, @target)")
            params.append({"name": "@target", "value": target})
        if state:
            where.append("c.state = @state")
            params.append({"name": "@state", "value": state})
        if tag:
            where.append("c.tags[@tagkey] = @tagvalue")
            params += [{"name": "@tagkey", "value": tag[0]}, {"name": "@tagvalue", "value": tag[1]}]
        sql = "SELECT * FROM c" + (" WHERE " + " AND ".join(where) if where else "")  # noqa: S608
        sql += " ORDER BY c.created_ms DESC"
        token = base64.urlsafe_b64decode(continuation.encode()).decode() if continuation else None
        try:
            pages = (
                self._c["runs"]
                .query_items(
                    sql, parameters=params, enable_cross_partition_query=True, max_item_count=limit
                )
                .by_page(token)
            )
            page = [_clean(d) for d in next(pages, [])]
            nxt = getattr(pages, "continuation_token", None)
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise _wrap(e, "query on runs") from e
        encoded = base64.urlsafe_b64encode(nxt.encode()).decode() if nxt and page else None
        return page, encoded

    def active_runs(self) -> list[Doc]:
        return self._query(
            "runs",
            "SELECT * FROM c WHERE c.finalized = false "
            "AND c.cancel_requested = false AND c.enqueued = true",
            [],
        )

    def waiting_runs(self) -> list[Doc]:
        return self._query("runs", "SELECT * FROM c WHERE c.state = 'waiting'", [])

    # ---- target locks and bot activities ----------------------------------------------

    def get_target_lock(self, key: str) -> Doc:
        return self._read("targets", key, key)

    def create_target_lock(self, doc: Doc) -> Doc:
        return self._create("targets", doc)

    def replace_target_lock(self, doc: Doc) -> Doc:
        return self._replace("targets", doc)

    def create_activity(self, doc: Doc) -> bool:
        return self._create_once("activities", doc)

    # ---- items, results, aggregates ---------------------------------------------------

    def create_item(self, doc: Doc) -> Doc:
        return self._create("items", doc)

    def get_item(self, run_id: str, item_id: str) -> Doc:
        return self._read("items", item_id, run_id)

    def replace_item(self, doc: Doc) -> Doc:
        return self._replace("items", doc)

    def list_items(self, run_id: str) -> list[Doc]:
        return self._query(
            "items",
            "SELECT * FROM c WHERE c.run_id = @r ORDER BY c.id",
            [{"name": "@r", "value": run_id}],
            pk=run_id,
        )

    def create_result(self, doc: Doc) -> bool:
        return self._create_once("results", doc)

    def get_result(self, run_id: str, item_id: str) -> Doc:
        return self._read("results", item_id, run_id)

    def list_results(self, run_id: str) -> list[Doc]:
        return self._query(
            "results",
            "SELECT * FROM c WHERE c.run_id = @r",
            [{"name": "@r", "value": run_id}],
            pk=run_id,
        )

    def create_aggregate(self, doc: Doc) -> bool:
        return self._create_once("aggregates", doc)

    def list_aggregates(self, run_id: str) -> list[Doc]:
        return self._query(
            "aggregates",
            "SELECT * FROM c WHERE c.run_id = @r",
            [{"name": "@r", "value": run_id}],
            pk=run_id,
        )

    # ---- series, regressions, schedules ----------------------------------------------

    def create_series_point(self, doc: Doc) -> bool:
        return self._create_once("series", doc)

    def list_series_points(self, series_key: str) -> list[Doc]:
        return self._query(
            "series",
            "SELECT * FROM c WHERE c.series_key = @k",
            [{"name": "@k", "value": series_key}],
            pk=series_key,
        )

    def list_all_series_points(self) -> list[Doc]:
        # No GROUP BY or DISTINCT in the local server's SQL: the caller groups in Python.
        return self._query(
            "series",
            "SELECT c.series_key, c.target, c.time_ms, c.clients, c.engine, c.workload FROM c",
            [],
        )

    def create_regression(self, doc: Doc) -> bool:
        return self._create_once("regressions", doc)

    def list_regressions(self, series_key: str | None = None) -> list[Doc]:
        if series_key is None:
            return self._query("regressions", "SELECT * FROM c", [])
        return self._query(
            "regressions",
            "SELECT * FROM c WHERE c.series_key = @k",
            [{"name": "@k", "value": series_key}],
            pk=series_key,
        )

    def get_regression(self, series_key: str, regression_id: str) -> Doc:
        return self._read("regressions", regression_id, series_key)

    def replace_regression(self, doc: Doc) -> Doc:
        return self._replace("regressions", doc)

    def create_schedule(self, doc: Doc) -> Doc:
        return self._create("schedules", doc)

    def get_schedule(self, schedule_id: str) -> Doc:
        return self._read("schedules", schedule_id, schedule_id)

    def replace_schedule(self, doc: Doc) -> Doc:
        return self._replace("schedules", doc)

    def delete_schedule(self, schedule_id: str) -> None:
        try:
            self._c["schedules"].delete_item(schedule_id, partition_key=schedule_id)
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise _wrap(e, f"schedules/{schedule_id}") from e

    def list_schedules(self) -> list[Doc]:
        return self._query("schedules", "SELECT * FROM c", [])
