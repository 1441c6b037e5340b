"""Issue 29.2: a result carries its other small artifacts too (the engine's output, its
logs: agent protocol 4), and the API puts them in Blob Storage in the result's own request.
At 1,000 simulated clients their two uploads were two of each client's three requests in
the results' burst. Checked on the in-memory store with the simulated clients' own results
(tests/test_thousand_clients); over HTTP with Azurite in tests/test_sim_agents and, with
real fio, tests/test_e2e."""

from __future__ import annotations

import base64
import gzip
import os
from collections import Counter

import pytest

from core.artifacts import ref, uploads
from core.errors import NotFound, ValidationFailed
from core.models import ArtifactName, Result
from core.models.holder import AgentRef, NotHolder
from core.models.result import INLINE_ARTIFACT_BYTES, FullResult
from core.models.state import ItemState, RunState
from core.receipts import Upload
from tests.test_thousand_clients import RATE, World


def test_small_artifacts_are_carried_only_by_an_api_that_takes_them() -> None:
    fits = gzip.compress(os.urandom(INLINE_ARTIFACT_BYTES - 64), mtime=0)  # incompressible
    big = gzip.compress(os.urandom(INLINE_ARTIFACT_BYTES + 1), mtime=0)
    assert len(fits) <= INLINE_ARTIFACT_BYTES < len(big)
    packed: dict[ArtifactName, bytes] = {"raw": fits, "logs": big, "counters": b"c"}
    assert uploads(packed, 3) == (packed, None, {})  # an API before protocol 4
    sent, timeline, carried = uploads(packed, 4)
    assert sent == {"logs": big} and timeline is None
    assert carried == {"raw": base64.b64encode(fits).decode(), "counters": "Yw=="}


def protocol_4_run(clients: int) -> tuple[World, str, Counter[str]]:
    """A run whose clients speak protocol 4, their uploads through the service counted."""
    world = World(clients)
    puts: Counter[str] = Counter()
    put = world.service.put_artifact

    def counted(run_id: str, item_id: str, name: str, data: bytes, agent: AgentRef) -> Upload:
        puts[name] += 1
        return put(run_id, item_id, name, data, agent)

    world.service.put_artifact = counted
    return world, world.run(lambda client: 4), puts


def test_carried_artifacts_are_kept_in_blob_storage_and_not_in_the_document() -> None:
    world, run_id, puts = protocol_4_run(40)
    assert not puts  # no upload: every artifact of a simulated client is this small
    results = world.store.results.of_run(run_id)
    assert len(results) == 40
    for r in results:
        assert r.inline_artifacts is None  # the document keeps none of them
        assert r.inline_timeline is not None
        for name in ("raw", "logs"):  # each kept as the result names it
            kept = world.artifacts.get(run_id, r.item_id, name)
            assert ref(name, kept) == r.artifacts[name]
    # The figures are those of the same run with every artifact uploaded.
    (agg,) = world.store.results.list_aggregates(run_id)
    old = World(40)
    old_run = old.run(lambda client: 2)
    (old_agg,) = old.store.results.list_aggregates(old_run)
    assert agg.read == old_agg.read and agg.read is not None
    assert agg.read.iops == pytest.approx(40 * RATE.iops, rel=1e-9)
    # A client's full result shows fio's own output, read back from Blob Storage.
    item = results[0].item_id
    full = world.service.full_result(run_id, item)
    old_full = old.service.full_result(old_run, item.replace(run_id, old_run))
    assert full.raw == old_full.raw and full.raw["jobs"]
    assert "inline_artifacts" not in FullResult.model_json_schema()["properties"]


def started_result(world: World) -> tuple[Result, AgentRef]:
    _, start = world.started_and_measured()
    result, agent = world.uploaded_results(start, lambda client: 4)[0]
    assert result.inline_artifacts and set(result.inline_artifacts) == {"raw", "logs"}
    return result, agent


def refused(world: World, result: Result, agent: AgentRef, body: dict[str, object]) -> str:
    with pytest.raises(ValidationFailed) as e:
        world.service.store_result(body, agent)
    with pytest.raises(NotFound):
        world.store.results.get(result.run_id, result.item_id)  # nothing written
    assert not [k for k in world.artifacts.blobs if f"/{result.item_id}/" in k]
    assert world.store.items.get_item(result.run_id, result.item_id).state != ItemState.COMPLETED
    return str(e.value)


def carrying(result: Result, name: str, data: bytes, *, named: bool) -> dict[str, object]:
    """The result as sent, carrying ``data`` as its artifact ``name`` (and naming it so)."""
    sent = result.model_dump(mode="json")
    sent["inline_artifacts"] = {**sent["inline_artifacts"], name: base64.b64encode(data).decode()}
    if named:
        sent["artifacts"] = {**sent["artifacts"], name: ref(name, data).model_dump()}  # type: ignore[arg-type]
    return sent


def test_a_carried_artifact_other_than_the_one_named_is_refused_naming_it() -> None:
    world = World(2)
    result, agent = started_result(world)
    why = refused(world, result, agent, carrying(result, "logs", b"other", named=False))
    assert "inline_artifacts.logs" in why and "sha256" in why
    # Carried but named nowhere in artifacts.
    assert "inline_artifacts.counters" in refused(
        world, result, agent, carrying(result, "counters", b"c", named=False)
    )
    # One byte over: within base64's length bound (a multiple of 3 bytes), refused by the
    # check of its bytes; three over: by the length bound. Either way naming the field.
    big = b"r" * (INLINE_ARTIFACT_BYTES + 1)
    why = refused(world, result, agent, carrying(result, "raw", big, named=True))
    assert "inline_artifacts.raw" in why and f"at most {INLINE_ARTIFACT_BYTES}" in why
    bigger = b"r" * (INLINE_ARTIFACT_BYTES + 3)
    why = refused(world, result, agent, carrying(result, "raw", bigger, named=True))
    assert why.startswith("inline_artifacts.raw") and "too long" in why
    # Its carried artifacts right, but naming an upload that never came: refused, and the
    # carried ones are not kept either.
    unsent = result.model_dump(mode="json")
    unsent["artifacts"] = {**unsent["artifacts"], "counters": ref("counters", b"c").model_dump()}
    assert "artifacts.counters" in refused(world, result, agent, unsent)
    # From an agent that does not hold the item: refused, nothing kept.
    with pytest.raises(NotHolder):
        world.service.store_result(
            result.model_dump(mode="json") | {"agent_id": "x"}, AgentRef("x")
        )
    assert not [k for k in world.artifacts.blobs if f"/{result.item_id}/" in k]
    # The result as the agent made it is stored, with its artifacts.
    assert world.service.store_result(result.model_dump(mode="json"), agent)
    kept = world.artifacts.get(result.run_id, result.item_id, "raw")
    assert ref("raw", kept) == result.artifacts["raw"]


def test_a_retry_after_the_result_is_stored_rewrites_no_artifact() -> None:
    """A completed item's artifacts are the ones its stored result names: a second result
    (a retry, or other bytes) is answered as a duplicate and changes no blob."""
    world = World(1)
    result, agent = started_result(world)
    assert world.service.store_result(result.model_dump(mode="json"), agent)
    assert world.store.runs.get(result.run_id).state == RunState.COMPLETED
    puts: list[str] = []
    put = world.artifacts.put

    def counted(run_id: str, owner: str, name: str, data: bytes) -> None:
        puts.append(name)
        put(run_id, owner, name, data)

    world.artifacts.put = counted  # type: ignore[method-assign]
    assert not world.service.store_result(result.model_dump(mode="json"), agent)
    other = carrying(result, "raw", gzip.compress(b"{}", mtime=0), named=True)
    assert not world.service.store_result(other, agent)
    assert not puts
    kept = world.artifacts.get(result.run_id, result.item_id, "raw")
    assert (
        ref("raw", kept) == world.store.results.get(result.run_id, result.item_id).artifacts["raw"]
    )


def test_a_stored_document_that_still_carries_artifacts_is_shown_without_them() -> None:
    """Results are stored without what they carried, but an admin's import writes documents
    as archived: a full result is shown from one that holds ``inline_artifacts`` all the
    same, without them."""
    world, run_id, _ = protocol_4_run(2)
    item = world.store.results.of_run(run_id)[0].item_id
    world.store.table["results"].docs[(run_id, item)]["inline_artifacts"] = {"raw": "cg=="}
    assert world.store.results.get(run_id, item).inline_artifacts == {"raw": "cg=="}
    full = world.service.full_result(run_id, item)
    assert full.inline_artifacts is None and full.raw["jobs"]
