"""An agent hands its result to whichever API instance answers (agent/handover.py), against a
loopback stand-in of an instance older than the one whose claim answer said protocol 4 (a
rollout): that instance refuses ``inline_artifacts`` as a field it does not know, and the
agent uploads what it carried and sends its result again, rather than failing the item."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent import handover
from agent.api_client import ApiClient, ApiError
from core.artifacts import ref
from core.models import ArtifactName, HostFacts, Result
from simagent.figures import DeclaredRate
from simagent.measured import measure
from tests.loopback import Quiet, serve
from tests.test_api_retries import ITEM as WORK  # one client's item

HOST = HostFacts(hostname="simulated", kernel="", os="simulated", cpu_count=0)
REFUSAL = {"errors": [{"field": "inline_artifacts", "message": "Extra inputs are not permitted"}]}


class OlderApi:
    """Claims answered as a protocol-4 instance would; results and uploads as one before it:
    a result carrying ``inline_artifacts`` (or, with ``refuse``, any result) is 400."""

    def __init__(self, refuse: dict[str, Any] | None = None) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        calls = self.calls

        class Handler(Quiet):
            def body(self) -> bytes:
                return self.rfile.read(int(self.headers["Content-Length"]))

            def do_POST(self) -> None:
                self.body()
                answer = {"action": "run", "reason": "", "agent_protocol": 4}
                self.send_body(200, json.dumps(answer).encode())

            def do_PUT(self) -> None:
                data = self.body()
                if "/artifacts/" in self.path:
                    calls.append(("artifact", self.path.split("/")[-1].split("?")[0], data))
                    reply = {"stored": True, "bytes": len(data), "receipt": ""}
                    self.send_body(201, json.dumps(reply).encode())
                    return
                result = json.loads(data)
                refused = refuse or ("inline_artifacts" in result and REFUSAL)
                calls.append(("result refused" if refused else "result", "", result))
                if refused:
                    self.send_body(400, json.dumps(refused).encode())
                else:
                    self.send_body(201, json.dumps({"stored": True}).encode())

        self.server, self.url = serve(Handler)


def measured() -> tuple[Result, dict[ArtifactName, bytes]]:
    m = measure(
        WORK,
        DeclaredRate(1000, 100_000),
        agent_id="a1",
        host=HOST,
        scheduled_ms=1_800_000_000_000,
        started_ms=1_800_000_000_000,
    )
    return m.result, m.artifacts


def test_a_result_refused_with_its_artifacts_by_an_older_instance_is_sent_again() -> None:
    api = OlderApi()
    try:
        client = ApiClient(api.url)
        client.claim(WORK, "a1", 1, "m1")
        assert client.api_protocol == 4
        result, packed = measured()
        sent, receipts = handover.prepared(client, WORK, "a1", result, packed)
        assert sent.inline_artifacts and set(sent.inline_artifacts) == {"raw", "logs"}
        assert not api.calls  # everything carried: nothing uploaded yet
        handover.put(client, WORK, "a1", sent, receipts)
    finally:
        api.server.shutdown()
    kinds = [kind for kind, _, _ in api.calls]
    assert kinds == ["result refused", "artifact", "artifact", "result"]
    uploaded = {name: data for kind, name, data in api.calls if kind == "artifact"}
    assert uploaded == {"raw": packed["raw"], "logs": packed["logs"]}
    stored = api.calls[-1][2]
    assert "inline_artifacts" not in stored and stored["inline_timeline"]
    assert {n: ref(n, d).model_dump() for n, d in packed.items()} == stored["artifacts"]


def test_any_other_refusal_is_the_api_s_answer() -> None:
    refusal = {"errors": [{"field": "agent_id", "message": "must be the reporting agent"}]}
    api = OlderApi(refuse=refusal)
    try:
        client = ApiClient(api.url)
        client.claim(WORK, "a1", 1, "m1")
        sent, receipts = handover.prepared(client, WORK, "a1", *measured())
        with pytest.raises(ApiError, match="agent_id"):
            handover.put(client, WORK, "a1", sent, receipts)
    finally:
        api.server.shutdown()
    assert [kind for kind, _, _ in api.calls] == ["result refused"]  # not sent again
