"""A cancel stops fio within README's 2 s (issue 24, point 5), in the worst case: the DELETE
lands just after the agent's heartbeat has read the run, so only the next heartbeat hears
it. The agent talks to the API through a recording proxy, so the test knows when each
heartbeat was answered; real agent, real fio, the real stack."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from benchctl import localstack
from benchctl.localstack import Stack
from tests.conftest import run_body, wait_until
from tests.loopback import Quiet, serve
from tests.test_e2e import alive, children, item_of

pytestmark = pytest.mark.fio

CANCEL_PROMISE_S = 2.0  # README, DELETE /api/runs/{id}


class RecordingProxy:
    """Forwards every request to the API; records when each heartbeat's answer went back."""

    def __init__(self, upstream: str) -> None:
        self.beats: list[float] = []
        self.beat = threading.Condition()
        client = httpx.Client(base_url=upstream, timeout=30)
        proxy = self

        class Handler(Quiet):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in ("host", "content-length", "connection")
                }
                r = client.request(self.command, self.path, content=body, headers=headers)
                self.send_response(r.status_code)
                for k, v in r.headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)
                self.wfile.flush()
                if self.path.startswith("/api/agent/heartbeat"):
                    with proxy.beat:
                        proxy.beats.append(time.monotonic())
                        proxy.beat.notify_all()

            do_GET = do_POST = do_PUT = do_DELETE = _forward

        self.server, self.url = serve(Handler)

    def next_beat(self, timeout: float) -> float:
        with self.beat:
            seen = len(self.beats)
            assert self.beat.wait_for(lambda: len(self.beats) > seen, timeout), "no heartbeat"
            return self.beats[-1]


@pytest.fixture
def proxy(stack: Stack) -> Iterator[RecordingProxy]:
    p = RecordingProxy(stack.api_url)
    yield p
    p.server.shutdown()


def test_a_cancel_heard_at_the_worst_moment_stops_fio_within_the_promise(
    stack: Stack, api: httpx.Client, proxy: RecordingProxy, pool: str, scratch: Any
) -> None:
    agent = localstack.start_agent(
        stack,
        f"{pool}-cancel",
        pool=pool,
        targets={"scratch": str(scratch)},
        extra=["--api-url", proxy.url],
    )
    try:
        run_id = api.post("/api/runs", json=run_body(pool, runtime=30)).json()["id"]
        wait_until(lambda: item_of(api, run_id)["state"] == "running", 30, what="running")
        fio = wait_until(lambda: children(agent.pid), 10, what="fio to start")
        proxy.next_beat(10)  # the heartbeat that moved the item to running, or a later one
        proxy.next_beat(10)  # answered: it read the run before the DELETE below
        sent = time.monotonic()
        assert api.delete(f"/api/runs/{run_id}").json()["state"] == "cancelled"
        wait_until(lambda: not any(alive(p) for p in fio), 10, 0.01, what="fio to stop")
        stopped_s = time.monotonic() - sent
        heard_s = proxy.beats[-1] - sent  # the heartbeat that answered {"cancel": true}
        print(f"DELETE to fio gone {stopped_s:.3f} s; heard at {heard_s:.3f} s")
        assert stopped_s <= CANCEL_PROMISE_S, (stopped_s, heard_s)
        wait_until(lambda: item_of(api, run_id)["state"] == "cancelled", 10, what="cancelled")
    finally:
        localstack.stop_proc(agent, timeout=5)
