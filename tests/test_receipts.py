"""Upload receipts (issue 29.2, core.receipts): a result that carries the receipts its
artifacts' puts answered is stored without asking Blob Storage about them again (at 1,000
clients, 3,000 HEADs in the burst of results); a receipt that does not match what the
result names (forged, for another item, for other bytes, from another key) sends that
artifact to Blob Storage as before, so nothing is accepted that was not before."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from agent.api_client import ApiClient
from core.artifacts import ref, sha256_hex
from core.errors import NotFound, StoreUnavailable, ValidationFailed
from core.memory import MemoryArtifacts
from core.models import WorkItem
from core.models.holder import AgentRef
from core.receipts import (
    KEY_NAME,
    KEY_OWNER,
    KEY_RUN,
    KEY_TTL_S,
    ReceiptKey,
    parse_receipts,
    receipts_header,
    sign,
    valid,
)
from simagent.measured import Measurements
from tests.loopback import Quiet, serve
from tests.test_api_retries import ITEM
from tests.test_thousand_clients import HOST, RATE, World

pytestmark = pytest.mark.unit


class CountedSizes(MemoryArtifacts):
    """Counts the checks of an artifact in Blob Storage (the adapter's HEAD)."""

    def __init__(self, blobs: dict[str, bytes]) -> None:
        super().__init__()
        self.blobs = blobs
        self.sizes = 0

    def size(self, run_id: str, owner: str, name: str) -> int:
        self.sizes += 1
        return super().size(run_id, owner, name)


def measured_world(clients: int) -> tuple[World, CountedSizes, list[Any]]:
    world = World(clients)
    counted = CountedSizes(world.artifacts.blobs)
    world.service.lifecycle.artifacts = counted
    _, start = world.started_and_measured()
    made = Measurements()
    out = []
    for w, agent in world.claimed:
        m = made.of(w, RATE, agent_id=agent.id, host=HOST, scheduled_ms=start, started_ms=start)
        out.append((w, agent, m))
    return world, counted, out


def upload(
    world: World, w: WorkItem, agent: AgentRef, m: Any
) -> tuple[dict[str, Any], dict[str, str]]:
    receipts = {}
    for name, data in m.artifacts.items():
        up = world.service.put_artifact(w.run_id, w.item_id, name, data, agent)
        assert up.bytes == len(data) and up.receipt
        receipts[name] = up.receipt
    body = m.result.model_copy(
        update={"artifacts": {k: ref(k, v) for k, v in m.artifacts.items()}}
    ).model_dump(mode="json")
    return body, receipts


def test_a_result_with_its_receipts_is_stored_without_a_check_in_blob_storage() -> None:
    world, counted, clients = measured_world(2)
    (w0, a0, m0), (w1, a1, m1) = clients
    body, receipts = upload(world, w0, a0, m0)
    assert world.service.store_result(body, a0, receipts)
    assert counted.sizes == 0  # was 3: one HEAD per artifact
    body, _ = upload(world, w1, a1, m1)
    assert world.service.store_result(body, a1)  # no receipts: checked as before
    assert counted.sizes == 3
    assert {i.state for i in world.store.items.of_run(w0.run_id)[1]} == {"completed"}


def test_a_receipt_that_does_not_match_is_checked_in_blob_storage_as_before() -> None:
    world, counted, clients = measured_world(2)
    (w0, a0, m0), (w1, a1, m1) = clients
    body0, receipts0 = upload(world, w0, a0, m0)
    # Item 1's timeline never uploaded; its result names it with item 0's receipt, a forged
    # one and an empty one in turn: each is refused, as a result naming it was before.
    for name, data in m1.artifacts.items():
        if name != "timeline":
            world.service.put_artifact(w1.run_id, w1.item_id, name, data, a1)
    body1 = m1.result.model_copy(
        update={"artifacts": {k: ref(k, v) for k, v in m1.artifacts.items()}}
    ).model_dump(mode="json")
    for forged in (receipts0["timeline"], "0" * 64, ""):
        with pytest.raises(ValidationFailed, match="timeline"):
            world.service.store_result(body1, a1, {"timeline": forged})
    # A receipt for other bytes than the result names (its sha256 or size) does not match.
    wrong = dict(body0, artifacts=dict(body0["artifacts"]))
    wrong["artifacts"]["raw"] = dict(wrong["artifacts"]["raw"], sha256="f" * 64)
    before = counted.sizes
    assert world.service.store_result(wrong, a0, receipts0)
    assert counted.sizes == before + 1  # raw's receipt did not match: asked Blob Storage


def test_receipts_are_the_api_instances_shared_key_and_not_forgeable_without_it() -> None:
    blobs = MemoryArtifacts()
    now = [0.0]
    first, second = ReceiptKey(blobs, lambda: now[0]), ReceiptKey(blobs, lambda: now[0])
    key = first.get()
    assert second.get() == key and len(key) == 32  # made by one, read by the other
    args = ("r-" + "1" * 32, "r-" + "1" * 32 + ".s0.c0", "timeline", 10, sha256_hex(b"x"))
    receipt = sign(key, *args)
    assert valid(key, receipt, *args)
    assert not valid(b"k" * 32, receipt, *args)
    assert not valid(key, receipt, args[0], args[1], "raw", *args[3:])
    assert not valid(key, None, *args)
    # A key replaced (deleted and made again): each instance reads it within the TTL.
    blobs.put(KEY_RUN, KEY_OWNER, KEY_NAME, b"n" * 32)
    assert first.get() == key
    now[0] += KEY_TTL_S
    assert first.get() == b"n" * 32


def test_instances_that_find_no_key_at_once_all_use_the_one_written() -> None:
    """Three instances' first uploads come together (a 1,000-client step's end): each found
    no key and wrote its own, and for a minute each refused the others' receipts (21:44
    UTC: 1,334 of 3,000 artifacts checked in Blob Storage). Only the first write is kept."""
    blobs = MemoryArtifacts()
    get = blobs.get
    keys = [ReceiptKey(blobs) for _ in range(3)]
    looked = threading.Barrier(3, timeout=10)
    first = threading.local()

    def none_yet(run_id: str, owner: str, name: str) -> bytes:
        if not getattr(first, "done", False):  # each instance's first look, all at once
            first.done = True
            looked.wait()
            raise NotFound("no key yet")
        return get(run_id, owner, name)

    blobs.get = none_yet  # type: ignore[method-assign]
    found: list[bytes] = []
    threads = [threading.Thread(target=lambda k=k: found.append(k.get())) for k in keys]
    for t in threads:  # one thread each: every instance's first look is its thread's first
        t.start()
    for t in threads:
        t.join()
    assert len(found) == 3
    assert len(set(found)) == 1
    assert get(KEY_RUN, KEY_OWNER, KEY_NAME) == found[0]


def test_a_put_without_its_key_still_stores_and_its_result_is_checked() -> None:
    world, counted, clients = measured_world(1)
    (w, agent, m) = clients[0]

    def down() -> bytes:
        raise StoreUnavailable("Blob Storage: no answer (simulated)", "Blob Storage")

    world.service.agent_reports.receipt_key.get = down  # type: ignore[method-assign]
    body, receipts = {}, {}
    for name, data in m.artifacts.items():
        up = world.service.put_artifact(w.run_id, w.item_id, name, data, agent)
        receipts[name] = up.receipt
    assert set(receipts.values()) == {""}
    body = m.result.model_copy(
        update={"artifacts": {k: ref(k, v) for k, v in m.artifacts.items()}}
    ).model_dump(mode="json")
    assert world.service.store_result(body, agent, receipts)
    assert counted.sizes == 3


def test_the_receipts_header_round_trips_and_malformed_parts_are_left_out() -> None:
    receipts = {"timeline": "ab", "raw": "cd", "logs": ""}
    assert parse_receipts(receipts_header(receipts)) == {"timeline": "ab", "raw": "cd"}
    assert parse_receipts(None) == {}
    assert parse_receipts("x, =y, z=, raw=1,,timeline=2") == {"raw": "1", "timeline": "2"}


def test_the_agents_client_returns_each_receipt_and_sends_them_with_the_result() -> None:
    """agent.api_client: an artifact's put gives back the API's receipt (empty from an API
    that answers none), and the result goes with them in X-Upload-Receipts."""
    seen: list[tuple[str, str | None]] = []

    class Handler(Quiet):
        def do_PUT(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.path, self.headers.get("X-Upload-Receipts")))
            receipt = {"receipt": "ab12"} if "/raw?" in self.path else {}
            self.send_body(201, json.dumps({"stored": True, "bytes": 2, **receipt}).encode())

    server, url = serve(Handler)
    try:
        client = ApiClient(url)
        assert client.put_artifact(ITEM, "vm1", "raw", b"\x1f\x8b") == "ab12"
        assert client.put_artifact(ITEM, "vm1", "logs", b"\x1f\x8b") == ""
        client.put_result({"item_id": ITEM.item_id, "agent_id": "vm1"}, {"raw": "ab12", "logs": ""})
        client.put_result({"item_id": ITEM.item_id, "agent_id": "vm1"})
    finally:
        server.shutdown()
    assert [h for _, h in seen] == [None, None, "raw=ab12", None]
