"""The retention rules (core.retention) applied by hand, where the platform does not: the
local Cosmos DB server has no TTL and Azurite no lifecycle management, so the local stack's
timer deletes the documents Cosmos DB would have expired and cools, then deletes, raw
artifacts as Blob lifecycle management would. In Azure this never runs: TTL and lifecycle
management do it (bicep/modules/cosmos.bicep, storage.bicep).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from azure.core.exceptions import AzureError
from azure.cosmos import exceptions as cx

from adapters.blob import RAW, BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.cosmos.base import wrap
from core.errors import NotFound
from core.retention import PER_ITEM_TTL, Retention

log = logging.getLogger(__name__)


@dataclass
class Swept:
    expired: dict[str, int] = field(default_factory=dict)  # container -> documents deleted
    cooled: int = 0
    deleted: int = 0  # raw artifacts


def sweep(
    store: CosmosStore,
    artifacts: BlobArtifacts,
    rules: Retention,
    now_s: float,
    *,
    raw_prefix: str = RAW,
) -> Swept:
    """One pass over what can expire. Documents are judged by ``_ts`` (their last write,
    as Cosmos DB's TTL judges them, with a document's own ``ttl`` before its container's),
    artifacts by their last modification."""
    out = Swept()
    ttls = rules.ttls()
    for name in [*ttls, *sorted(PER_ITEM_TTL)]:
        container = store.container(name)
        if name in ttls:
            sql, value = "SELECT * FROM c WHERE c._ts < @v", int(now_s - ttls[name])
        else:  # only those carrying a ttl of their own (a finished delivery)
            sql, value = "SELECT * FROM c WHERE c.ttl > @v", 0
        try:
            old = list(
                container.proxy.query_items(
                    sql,
                    parameters=[{"name": "@v", "value": value}],
                    enable_cross_partition_query=True,
                )
            )
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise wrap(e, f"expired documents of {name}") from e
        for doc in old:
            own = doc.get("ttl")
            own_ttl = float(own) if isinstance(own, int | float) else None
            if not rules.expired(name, float(doc["_ts"]), now_s, own_ttl):
                continue
            try:
                container.delete(str(doc["id"]), str(doc[store.partition_field(name)]))
            except NotFound:
                continue  # expired by someone else meanwhile
            out.expired[name] = out.expired.get(name, 0) + 1
    for blob in artifacts.listed(raw_prefix):
        action = rules.raw_action(blob.name, blob.modified_s, now_s, blob.tier)
        if action == "delete":
            artifacts.delete(blob)
            out.deleted += 1
        elif action == "cool":
            artifacts.cool(blob)
            out.cooled += 1
    if out.expired or out.cooled or out.deleted:
        log.info("retention: %s", out)
    return out
