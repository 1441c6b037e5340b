"""Issue 29.2: a result carries its timeline when it packs to at most 4 KiB (agent protocol
3), so a run's finalizer reads no blob for it and its agent uploads one artifact fewer. At
1,000 clients the finalizer's 1,000 blob reads took 5 s after the last result. Checked on
the in-memory store with the simulated clients' own results (tests/test_thousand_clients)."""

from __future__ import annotations

import base64
import gzip
import os
from collections import Counter
from collections.abc import Callable

import pytest

from core.artifacts import ref, uploads
from core.errors import NotFound, ValidationFailed
from core.models import ArtifactName, Result, StepAggregate
from core.models.holder import AgentRef
from core.models.result import (
    INLINE_TIMELINE_BYTES,
    INLINE_TIMELINE_UNPACKED_BYTES,
    FullResult,
)
from core.models.state import ItemState, RunState
from tests.test_thousand_clients import RATE, World

Reads = Counter[str]


def test_a_small_timeline_is_carried_only_when_the_api_takes_it() -> None:
    fits = gzip.compress(os.urandom(INLINE_TIMELINE_BYTES - 64), mtime=0)  # incompressible
    assert len(fits) <= INLINE_TIMELINE_BYTES
    packed: dict[ArtifactName, bytes] = {"raw": b"r", "logs": b"l", "timeline": fits}
    assert uploads(packed, 2) == (packed, None, {})  # an API before protocol 3
    carried = base64.b64encode(fits).decode()
    assert uploads(packed, 3) == ({"raw": b"r", "logs": b"l"}, carried, {})
    big = gzip.compress(os.urandom(INLINE_TIMELINE_BYTES + 1), mtime=0)
    for timeline in (big, gzip.compress(b" " * (INLINE_TIMELINE_UNPACKED_BYTES + 1), mtime=0)):
        other: dict[ArtifactName, bytes] = {**packed, "timeline": timeline}
        assert uploads(other, 3) == (other, None, {})  # too big, or unpacks too big
    alone: dict[ArtifactName, bytes] = {"raw": b"r"}
    assert uploads(alone, 3) == (alone, None, {})


def counted_run(clients: int, protocol: Callable[[int], int]) -> tuple[World, str, Reads]:
    """A run of ``clients`` whose reads of timelines from Blob Storage are counted."""
    world = World(clients)
    reads: Reads = Counter()
    get = world.artifacts.get

    def counted(run_id: str, owner: str, name: str) -> bytes:
        reads[name] += 1
        return get(run_id, owner, name)

    world.artifacts.get = counted  # type: ignore[method-assign]
    # The result's check of an upload's size is not a read of its timeline.
    world.artifacts.size = lambda run_id, owner, name: len(get(run_id, owner, name))  # type: ignore[method-assign]
    return world, world.run(protocol), reads


def aggregate(world: World, run_id: str) -> StepAggregate:
    assert world.store.runs.get(run_id).state == RunState.COMPLETED
    (agg,) = world.store.results.list_aggregates(run_id)
    return agg


def test_results_carrying_their_timelines_are_aggregated_with_no_blob_read() -> None:
    world, run_id, reads = counted_run(40, lambda client: 3)
    assert reads["timeline"] == 0
    assert not [k for k in world.artifacts.blobs if k.endswith("/timeline")]  # none uploaded
    agg = aggregate(world, run_id)
    assert agg.clients == 40 and not agg.failed_clients and not agg.partial
    assert agg.read is not None and agg.read.iops == pytest.approx(40 * RATE.iops, rel=1e-9)
    # The same figures, second by second, as the same run with its timelines in blobs.
    blob_world, blob_run, blob_reads = counted_run(40, lambda client: 2)
    assert blob_reads["timeline"] == 40
    blob_agg = aggregate(blob_world, blob_run)
    assert agg.read == blob_agg.read and agg.window == blob_agg.window
    assert world.store.results.list_aggregates(run_id)[0].series_artifact == (
        blob_world.store.results.list_aggregates(blob_run)[0].series_artifact
    )
    # A client's full result reads its series from the result, and shows no base64.
    item = world.store.results.of_run(run_id)[0].item_id
    full = world.service.full_result(run_id, item)
    blob_full = blob_world.service.full_result(blob_run, item.replace(run_id, blob_run))
    assert full.series == blob_full.series and full.series["read"]
    assert "inline_timeline" not in full.model_dump(mode="json")
    # Nor does its description in the API's document say it might.
    assert "inline_timeline" not in FullResult.model_json_schema()["properties"]
    assert "inline_timeline" in Result.model_json_schema()["properties"]


@pytest.mark.parametrize("carried", [lambda c: 3 - c % 2, lambda c: 2 + c % 2])
def test_a_fleet_of_old_and_new_agents_is_aggregated_whole(carried: Callable[[int], int]) -> None:
    """The finalizer asks one result whether it carries its timeline; whichever answer it
    gets, the results that do not have theirs read, and only those."""
    world, run_id, reads = counted_run(20, carried)
    agg = aggregate(world, run_id)
    assert agg.clients == 20 and not agg.failed_clients
    assert agg.read is not None and agg.read.iops == pytest.approx(20 * RATE.iops, rel=1e-9)
    assert reads["timeline"] in (10, 20)  # the blob ones, or a prefetch of all 20


def one_result(world: World) -> tuple[Result, AgentRef]:
    _, start = world.started_and_measured()
    return world.uploaded_results(start, lambda client: 3)[0]


def refused(world: World, result: Result, agent: AgentRef, body: dict[str, object]) -> str:
    with pytest.raises(ValidationFailed) as e:
        world.service.store_result(body, agent)
    with pytest.raises(NotFound):
        world.store.results.get(result.run_id, result.item_id)  # nothing written
    item = world.store.items.get_item(result.run_id, result.item_id)
    assert item.state != ItemState.COMPLETED
    return str(e.value)


def carrying(result: Result, data: bytes) -> dict[str, object]:
    """The result as sent, carrying ``data`` as its timeline and naming it so."""
    sent = result.model_dump(mode="json")
    named = {**sent["artifacts"], "timeline": ref("timeline", data).model_dump()}
    return sent | {"inline_timeline": base64.b64encode(data).decode(), "artifacts": named}


def test_a_carried_timeline_other_than_the_one_named_is_refused_naming_it() -> None:
    world = World(2)
    result, agent = one_result(world)
    assert result.inline_timeline is not None
    other = gzip.compress(b'{"start_ms": 1, "end_ms": 2}', mtime=0)
    body = result.model_dump(mode="json") | {"inline_timeline": base64.b64encode(other).decode()}
    assert "inline_timeline" in refused(world, result, agent, body)
    # Named as it is, but not a timeline: refused too, not left for the finalizer to trip on.
    assert "not a packed timeline" in refused(world, result, agent, carrying(result, b"not gzip"))
    for big in (b"t" * (INLINE_TIMELINE_BYTES + 1), b"t" * (INLINE_TIMELINE_BYTES + 2)):
        assert "inline_timeline" in refused(world, result, agent, carrying(result, big))
    # Within the bound but unpacking to megabytes (a gzip bomb), or with a second gzip
    # member after a good one (which the finalizer's gunzip would append): refused.
    good = result.carried_timeline() or b""
    for bad in (gzip.compress(b" " * 8_000_000, mtime=0), good + gzip.compress(b"}", mtime=0)):
        assert len(bad) <= INLINE_TIMELINE_BYTES
        assert "not a packed timeline" in refused(world, result, agent, carrying(result, bad))
    # The result as the agent made it is stored.
    assert world.service.store_result(result.model_dump(mode="json"), agent)
