"""benchctl always sends an Idempotency-Key and retries with it (issue 24.4): a submission
whose answer is lost makes one run, not two. Through a loopback proxy in front of the real
API that passes the first POST on and answers the client 503 itself (as a gateway does
when the API's answer does not come back)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from benchctl.localstack import Stack
from tests.conftest import run_body
from tests.loopback import Quiet, serve


class LosingProxy:
    """Forwards everything to the API; the answer to the first POST /api/runs is lost."""

    def __init__(self, upstream: str) -> None:
        self.keys: list[str | None] = []
        proxy = self

        class Handler(Quiet):
            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                r = httpx.request(
                    self.command, upstream + self.path, content=body, headers=headers, timeout=30
                )
                if self.command == "POST" and self.path == "/api/runs":
                    proxy.keys.append(self.headers.get("Idempotency-Key"))
                    if len(proxy.keys) == 1:  # the run was made; its answer is lost
                        self._send(503, b'{"errors": [{"field": "(service)", "message": "x"}]}')
                        return
                self._send(r.status_code, r.content)

            def _send(self, status: int, content: bytes) -> None:
                self.send_body(status, content, "application/json")

            do_GET = do_POST = do_DELETE = _forward

        self.server, self.url = serve(Handler)


@pytest.fixture
def proxy(stack: Stack) -> Iterator[LosingProxy]:
    p = LosingProxy(stack.api_url)
    yield p
    p.server.shutdown()


def test_a_lost_answer_is_retried_with_the_same_key_and_makes_one_run(
    proxy: LosingProxy, api: httpx.Client, pool: str
) -> None:
    tag = f"retry-{pool}"
    body = run_body(pool)
    argv = [sys.executable, "-m", "benchctl", "--api-url", proxy.url, "run"]
    argv += ["--target", body["target"], "--pool", pool, "--tag", f"probe={tag}"]
    argv += ["--rw", "randread", "--bs", "4k", "--size", "8m", "--runtime", "2"]
    argv += ["--format", "json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "retrying" in done.stderr
    created = json.loads(done.stdout)
    assert len(proxy.keys) == 2 and proxy.keys[0] == proxy.keys[1]
    assert (proxy.keys[0] or "").startswith("benchctl-")
    runs = api.get("/api/runs", params={"tag": f"probe={tag}"}).json()["runs"]
    assert [r["id"] for r in runs] == [created["id"]]  # one run, the one benchctl reports
    api.delete(f"/api/runs/{created['id']}")
