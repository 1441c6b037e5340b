"""One Cosmos DB container, as the repositories use it: create, read, replace by ETag,
query, page; Azure's limits held locally (a document is at most 2 MB); SDK errors mapped
to the project's own (``NotFound``, ``Conflict``, ``StoreUnavailable``, ``TooLarge``)."""

from __future__ import annotations

import base64
import json
import logging
import re
from collections.abc import Mapping
from typing import Any, TypedDict

from azure.core import MatchConditions
from azure.core.exceptions import AzureError
from azure.cosmos import ContainerProxy
from azure.cosmos import exceptions as cx
from pydantic import JsonValue

from core.errors import Conflict, FieldError, NotFound, StoreUnavailable, TooLarge, ValidationFailed
from core.models.document import StoredJson
from core.ports import CONTINUATION_PATTERN

log = logging.getLogger(__name__)
# Azure Cosmos DB's maximum item size (service quotas: "Maximum size of an item: 2 MB",
# measured on the item's JSON). The local server has no such limit; the adapter holds
# it so tests see what Azure would refuse.
MAX_DOCUMENT_BYTES = 2 * 1024 * 1024


def _check_size(container: str, doc: StoredJson) -> None:
    size = len(json.dumps(doc, separators=(",", ":")).encode())
    if size > MAX_DOCUMENT_BYTES:
        raise TooLarge(
            f"{container}/{doc.get('id')} is {size:,} bytes; Cosmos DB takes at most "
            f"{MAX_DOCUMENT_BYTES:,}"
        )


class Param(TypedDict):
    """A query parameter: its ``@name`` in the SQL and its value."""

    name: str
    value: JsonValue


def _sdk(params: list[Param]) -> list[dict[str, object]]:
    return [dict(p) for p in params]


def _clean(doc: Mapping[str, Any], keep: frozenset[str] = frozenset({"_etag"})) -> StoredJson:
    """Drop Cosmos system properties except the ETag, which compare-and-swap needs (and
    ``_ts`` where it is asked for: a run's creation is judged by it, core.runs.commit)."""
    return {k: v for k, v in dict(doc).items() if not k.startswith("_") or k in keep}


def wrap(e: Exception, what: str) -> Exception:
    if isinstance(e, cx.CosmosResourceNotFoundError):
        return NotFound(what)
    if isinstance(e, cx.CosmosResourceExistsError):
        return Conflict(f"{what} already exists")
    if isinstance(e, cx.CosmosAccessConditionFailedError):
        return Conflict(f"{what} changed concurrently")
    return StoreUnavailable(f"Cosmos DB: {what}: {e}", "Cosmos DB")


# What ``page`` hands out: URL-safe Base64 (the OpenAPI document says so). Anything else is
# the caller's mistake (400); a token of that form this listing did not give, or gave for
# another query, names no page: 404 (a schema cannot tell the two apart, so the document
# promises the form and the server answers 404 for the rest).
_TOKEN = re.compile(CONTINUATION_PATTERN)


def _bad_continuation() -> ValidationFailed:
    message = "not a continuation token: URL-safe Base64 as a listing gives it"
    return ValidationFailed([FieldError("continuation", message)])


def _unknown_continuation() -> NotFound:
    return NotFound(
        "no page of this listing has this continuation token (ask again without it)",
        "continuation",
    )


def _decode_continuation(continuation: str) -> str:
    """The database's token inside what ``page`` handed out (URL-safe Base64 of it)."""
    if not _TOKEN.fullmatch(continuation):
        raise _bad_continuation()
    try:
        token = base64.b64decode(continuation.encode("ascii"), altchars=b"-_", validate=True)
        text = token.decode("ascii")
    except ValueError:  # binascii.Error and UnicodeError are ValueErrors
        raise _unknown_continuation() from None
    if not text or not text.isprintable():  # the token travels in an HTTP header
        raise _unknown_continuation()
    return text


class Container:
    """A container (its partition key path is in CONTAINERS, for creating it; each call
    names the partition key value)."""

    def __init__(self, proxy: ContainerProxy, *, timestamps: bool = False) -> None:
        self.proxy = proxy
        self.name = proxy.id
        self._keep = frozenset({"_etag", "_ts"} if timestamps else {"_etag"})

    def _clean(self, doc: Mapping[str, Any]) -> StoredJson:
        return _clean(doc, self._keep)

    def create(self, doc: StoredJson) -> StoredJson:
        _check_size(self.name, doc)
        try:
            return self._clean(self.proxy.create_item(doc))
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise wrap(e, f"{self.name}/{doc.get('id')}") from e

    def upsert(self, doc: StoredJson) -> StoredJson:
        _check_size(self.name, doc)
        try:
            return self._clean(self.proxy.upsert_item(doc))
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise wrap(e, f"{self.name}/{doc.get('id')}") from e

    def create_all(self, docs: list[StoredJson], pk: str) -> None:
        """Create every document of one partition in one request (a transactional batch:
        all or none). Conflict when one of them exists already, and nothing is created."""
        for doc in docs:
            _check_size(self.name, doc)
        ops: list[tuple[str, tuple[Any, ...]]] = [("create", (doc,)) for doc in docs]
        try:
            self.proxy.execute_item_batch(ops, partition_key=pk)
        except cx.CosmosBatchOperationError as e:
            failed = docs[e.error_index or 0].get("id")
            if e.status_code == 409:
                raise Conflict(f"{self.name}/{failed} already exists") from e
            raise wrap(e, f"{self.name}/{failed}") from e
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise wrap(e, f"{self.name}: a batch of {len(docs)}") from e

    def create_once(self, doc: StoredJson) -> bool:
        try:
            self.create(doc)
            return True
        except Conflict:
            return False

    def read(self, id_: str, pk: str) -> StoredJson:
        """A point read: by id and partition key, never a query (the local server answers
        queries by scanning the container; scripts/cosmosdb-server.js)."""
        try:
            return self._clean(self.proxy.read_item(id_, partition_key=pk))
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise wrap(e, f"{self.name}/{id_}") from e

    def replace(self, doc: StoredJson, etag: str | None) -> StoredJson:
        """Write ``doc`` over its stored version only if that still has ``etag``."""
        _check_size(self.name, doc)
        try:
            return self._clean(
                self.proxy.replace_item(
                    doc["id"], doc, etag=etag, match_condition=MatchConditions.IfNotModified
                )
            )
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise wrap(e, f"{self.name}/{doc.get('id')}") from e

    def delete(self, id_: str, pk: str) -> None:
        try:
            self.proxy.delete_item(id_, partition_key=pk)
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise wrap(e, f"{self.name}/{id_}") from e

    def query(self, sql: str, params: list[Param], pk: str | None = None) -> list[StoredJson]:
        try:
            if pk is None:
                it = self.proxy.query_items(
                    sql, parameters=_sdk(params), enable_cross_partition_query=True
                )
            else:
                it = self.proxy.query_items(sql, parameters=_sdk(params), partition_key=pk)
            return [self._clean(d) for d in it]
        except (cx.CosmosHttpResponseError, AzureError) as e:
            raise wrap(e, f"query on {self.name}") from e

    def page(
        self, sql: str, params: list[Param], *, limit: int, continuation: str | None
    ) -> tuple[list[StoredJson], str | None]:
        """One page of a cross-partition query, and the token of the next (opaque to the
        caller: URL-safe Base64 of the database's own)."""
        token = _decode_continuation(continuation) if continuation else None
        try:
            pages = self.proxy.query_items(
                sql,
                parameters=_sdk(params),
                enable_cross_partition_query=True,
                max_item_count=limit,
            ).by_page(token)
            page = [self._clean(d) for d in next(pages, [])]
            nxt = getattr(pages, "continuation_token", None)
        except cx.CosmosHttpResponseError as e:
            # Cosmos DB answers 400 to a token it did not issue (or issued for another query).
            if token is not None and e.status_code == 400:
                raise _unknown_continuation() from None
            raise wrap(e, f"query on {self.name}") from e
        except AzureError as e:
            raise wrap(e, f"query on {self.name}") from e
        except (ValueError, KeyError, TypeError):
            if token is None:
                raise
            raise _unknown_continuation() from None  # the SDK could not read the token itself
        encoded = base64.urlsafe_b64encode(nxt.encode()).decode() if nxt and page else None
        return page, encoded
