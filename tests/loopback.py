"""A loopback HTTP server on a thread of its own: the tests' stand-ins for the API (scripted,
recording, proxying) and for what the service calls (a webhook, a vault, a collector)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Quiet(BaseHTTPRequestHandler):
    """A handler that logs nothing (the test's output stays its own) and sends whole bodies."""

    def log_message(self, *args: Any) -> None:
        pass

    def send_body(self, status: int, body: bytes, content_type: str | None = None) -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve(handler: type[BaseHTTPRequestHandler], path: str = "") -> tuple[ThreadingHTTPServer, str]:
    """Serves on a free port until ``shutdown()``; the URL is the server's, plus ``path``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # A short poll interval keeps shutdown() (and so a test's teardown) fast.
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}{path}"
