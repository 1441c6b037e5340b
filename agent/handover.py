"""How an agent hands over an item's outcome (over its API client): the large artifacts
uploaded, the small ones carried in the result (core.artifacts.uploads, by the protocol its
last claim's answer said), then the result.

An API instance older than the one that answered the claim refuses the fields it does not
know (a rollout or a rollback, requests landing on any instance): a result refused naming
``inline_artifacts`` has them uploaded and is sent again without them, so the measurement
is kept rather than the item failed."""

from __future__ import annotations

import logging

from agent.api_client import ApiClient, ApiError
from core.artifacts import uploads
from core.models import ArtifactName, Result, WorkItem

log = logging.getLogger(__name__)


def prepared(
    api: ApiClient, item: WorkItem, agent_id: str, result: Result, packed: dict[ArtifactName, bytes]
) -> tuple[Result, dict[str, str]]:
    """The result naming (and carrying) its artifacts, the large ones uploaded first, with
    the API's receipts for them."""
    up = uploads(packed, api.api_protocol)
    receipts: dict[str, str] = {}
    for name, data in up.sent.items():
        receipts[name] = api.put_artifact(item, agent_id, name, data)
    return result.model_copy(update=up.result_fields(packed)), receipts


def put(
    api: ApiClient, item: WorkItem, agent_id: str, result: Result, receipts: dict[str, str]
) -> None:
    """Store the result (ApiError: refused)."""
    try:
        api.put_result(result.model_dump(mode="json"), receipts)
    except ApiError as e:
        if e.status != 400 or not result.inline_artifacts or "inline_artifacts" not in str(e):
            raise
        log.warning(
            "item %s: result refused with its artifacts (%s): uploading them", item.item_id, e
        )
        receipts = dict(receipts)
        for name, data in result.carried_artifacts().items():
            receipts[name] = api.put_artifact(item, agent_id, name, data)
        api.put_result(result.as_stored().model_dump(mode="json"), receipts)
