"""The SDK clients' transport (adapters/transport.py): its TLS connections share one
context, so a new connection loads no certificates (it cost ~50 ms of CPU each, 18 % of an
API instance's samples in a 100-client run), and a verifying transport still refuses a
certificate it does not trust."""

from __future__ import annotations

import http.server
import ssl
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import pytest
import requests
from azure.core.pipeline.transport import HttpRequest

from adapters.cosmos import CosmosStore
from adapters.transport import POOL_SIZE, pooled_transport
from benchctl import localstack
from benchctl.local_procs import wait_listening
from benchctl.localstack import Stack


@pytest.fixture
def cosmos(tmp_path: Path) -> Iterator[Stack]:
    st = Stack(dir=str(tmp_path), queue_port=0, cosmos_port=localstack.free_port(), api_port=0)
    st.save()
    proc = localstack.start_cosmos(st)
    try:
        wait_listening("Cosmos DB server", proc)
        yield st
    finally:
        localstack.stop_proc(proc)


@pytest.mark.stack
def test_new_tls_connections_load_no_certificates(
    cosmos: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = CosmosStore.from_settings(cosmos.settings())
    store.ensure_containers()
    runs = store.container("runs")
    runs.create({"id": "r-1", "state": "queued"})
    loads: list[str] = []
    for name in ("load_default_certs", "load_verify_locations"):
        original = getattr(ssl.SSLContext, name)

        def counted(self: ssl.SSLContext, *a: Any, _o: Any = original, _n: str = name) -> Any:
            loads.append(_n)
            return _o(self, *a)

        monkeypatch.setattr(ssl.SSLContext, name, counted)
    with ThreadPoolExecutor(POOL_SIZE) as pool:  # as many connections as the API's threads
        read = list(pool.map(lambda _: runs.read("r-1", "r-1")["state"], range(4 * POOL_SIZE)))
    assert read == ["queued"] * 4 * POOL_SIZE
    assert loads == []


@pytest.mark.stack
@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_a_verifying_transport_refuses_an_untrusted_certificate(cosmos: Stack) -> None:
    """The stand-in's certificate is self-signed: only the local client, which says so,
    may skip the check."""
    session = pooled_transport(verify=True).session
    assert session is not None
    with pytest.raises(requests.exceptions.SSLError):
        session.get(f"https://127.0.0.1:{cosmos.cosmos_port}/", timeout=5)
    trusting = pooled_transport(verify=False).session
    assert trusting is not None
    assert trusting.get(f"https://127.0.0.1:{cosmos.cosmos_port}/", verify=False, timeout=5)


@pytest.mark.unit
def test_clients_share_one_context_per_process_and_mode() -> None:
    """A simulated fleet makes a queue client per simulated agent: a context each, its
    bundle loaded each time, was 24 CPU-s of a 1,000-client fleet's start-up."""
    verifying = [pooled_transport().session for _ in range(50)]
    contexts = {
        id(s.get_adapter("https://x").poolmanager.connection_pool_kw["ssl_context"])
        for s in verifying
        if s is not None
    }
    assert len(contexts) == 1
    trusting = pooled_transport(verify=False).session
    assert trusting is not None
    other = trusting.get_adapter("https://x").poolmanager.connection_pool_kw["ssl_context"]
    assert id(other) not in contexts and other.verify_mode == ssl.CERT_NONE


class _Seen(http.server.BaseHTTPRequestHandler):
    """Answers 200 to any GET and keeps its request line and Authorization header."""

    seen: ClassVar[list[tuple[str, str | None]]] = []

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("Authorization")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def listener() -> Iterator[tuple[int, list[tuple[str, str | None]]]]:
    _Seen.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Seen)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1], _Seen.seen
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.unit
def test_no_proxy_configured_so_no_netrc_credentials_are_sent(
    listener: tuple[int, list[tuple[str, str | None]]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """requests reads ~/.netrc on every request when it trusts the environment (issue 29's
    profile: ~10 % of a simulated fleet's busy time); a netrc entry for the host must not
    turn into a Basic Authorization header on an SDK call either."""
    port, seen = listener
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine 127.0.0.1 login someone password secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    transport = pooled_transport()
    with transport:
        response = transport.send(HttpRequest("GET", f"http://127.0.0.1:{port}/blob"))
    assert response.status_code == 200
    assert seen == [("/blob", None)]


@pytest.mark.unit
def test_a_proxy_in_the_environment_is_still_used(
    listener: tuple[int, list[tuple[str, str | None]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, seen = listener
    for name in ("https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
    transport = pooled_transport()
    with transport:
        response = transport.send(HttpRequest("GET", "http://storage.invalid/queue"))
    assert response.status_code == 200
    assert seen == [("http://storage.invalid/queue", None)]  # the proxy got it, whole
