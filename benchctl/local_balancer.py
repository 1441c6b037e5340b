"""The load balancer of a local stack with several API instances (``benchctl local up
--api-instances N``): Debian's nginx on the stack's API port, proxying to N uvicorn
processes on private ports, as Azure's front end spreads requests over a Function App's
instances. The CLI, the agents and the tests reach the API only through it.

Also what the stack installs when it is missing: the pinned npm packages, fio and nginx."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from benchctl.local_procs import Proc, tail
from benchctl.local_state import ROOT, StackError, checkout

NGINX = "/usr/sbin/nginx"
BIN = ROOT / "node_modules" / ".bin"
TIMER_LEASE_S = 15  # the shortest blob lease: the timers' takeover bound is this + a tick


def _apt_install(package: str) -> None:
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    subprocess.run([*sudo, "apt-get", "update", "-qq"], check=True)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-qq", package], check=True)


def ensure_installed() -> None:
    """Install what the stack needs and is missing: the pinned npm packages and fio."""
    checkout()
    if not (BIN / "azurite-queue").exists() or not (BIN / "cosmosdb-server").exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=ROOT, check=True)
    if shutil.which("fio") is None:
        _apt_install("fio")


def ensure_nginx() -> None:
    # nginx-light: the proxy and upstream modules without the rest; Debian's policy-rc.d
    # (or its absence of an init) decides whether the package's own service starts.
    if not Path(NGINX).exists():
        _apt_install("nginx-light")


def nginx_conf(directory: Path, port: int, upstreams: list[int]) -> str:
    """A foreground nginx whose files all live in ``directory`` (none in /etc or /var)."""
    d = directory.resolve()
    servers = "\n".join(
        # A refused connection takes the instance out for 2 s; the request goes to the next.
        f"    server 127.0.0.1:{p} max_fails=1 fail_timeout=2s;"
        for p in upstreams
    )
    temps = "\n".join(
        f"  {kind}_temp_path {d / 'tmp' / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers must reach the stack's dir
    return f"""{user}daemon off;
worker_processes 1;
pid {d / "nginx.pid"};
error_log {d / "error.log"} warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
{temps}
  upstream api {{
{servers}
  }}
  server {{
    listen 127.0.0.1:{port};
    # The API judges sizes itself and answers 413 with its JSON body.
    client_max_body_size 0;
    location / {{
      proxy_pass http://api;
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      # Long polls and live streams pass through as they come.
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 300s;
      proxy_send_timeout 300s;
      # A request no instance received (connection refused) is tried on the next one;
      # one an instance received and died with is a 502, which callers already retry.
      proxy_next_upstream error timeout;
      proxy_next_upstream_tries {len(upstreams)};
    }}
  }}
}}
"""


def nginx_argv(directory: Path, port: int, upstreams: list[int]) -> list[str]:
    """Write the configuration into ``directory`` and return nginx's command line."""
    directory.mkdir(parents=True, exist_ok=True)
    for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (directory / "tmp" / kind).mkdir(parents=True, exist_ok=True)
    conf = directory / "nginx.conf"
    conf.write_text(nginx_conf(directory, port, upstreams))
    (directory / "nginx.pid").unlink(missing_ok=True)  # wait_bound waits for this run's
    # -e: the log of startup errors, before the configuration is read (nginx >= 1.19.5)
    return [NGINX, "-p", str(directory.resolve()), "-e", "stderr", "-c", str(conf.resolve())]


def wait_bound(directory: Path, p: Proc, timeout: float = 30.0) -> None:
    """Until nginx has bound the stack's API port: it writes its pid file only after it
    has. Before that, an answer on the port may be another server's (a stack that took
    the port between our check and nginx's bind), so a health check alone proves nothing.
    An nginx that exits is a StackError with its log (``already in use``: the caller
    takes another port)."""
    pid_file = directory / "nginx.pid"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pid_file.exists() and pid_file.read_text().strip() == str(p.pid):
            return
        if not p.alive():
            raise StackError(f"nginx exited: {tail(p.log, 3)}")
        time.sleep(0.05)
    raise StackError(f"nginx did not bind port {p.port} within {timeout:g} s: {tail(p.log, 3)}")
