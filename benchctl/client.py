"""HTTP client for the service API, as used by benchctl.

Where to connect and how to sign in come from, in this order: flags, environment
(BENCH_API_URL, BENCH_API_KEY, BENCH_API_SCOPE), a config file (--config, $BENCHCTL_CONFIG
or ~/.config/benchctl/config.toml: ``api_url``, ``api_key``, ``scope``), and finally the
local stack. With a scope, benchctl gets an Entra ID token from azure-identity's
DefaultAzureCredential: a pipeline's workload identity, a managed identity, or `az login`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchctl.localstack import Stack


class CliError(Exception):
    """Ends the command with a message and an exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class ApiUnavailable(CliError):
    """No answer, a timeout, 429 or a 5xx: may pass (a restart, a cold start)."""


CI_VARIABLES = ("CI", "TF_BUILD", "GITHUB_ACTIONS")  # set by pipelines (Azure DevOps: TF_BUILD)


@dataclass(frozen=True)
class Connection:
    api_url: str
    api_key: str | None = None
    scope: str | None = None  # e.g. api://<client id>/.default

    def headers(self) -> dict[str, str]:
        door = "pipeline" if any(os.environ.get(v) for v in CI_VARIABLES) else "cli"
        out = {"X-Bench-Door": door}
        if self.api_key:
            out["X-Api-Key"] = self.api_key
        return out

    def token_provider(self) -> Callable[[], str] | None:
        if not self.scope:
            return None
        from azure.identity import DefaultAzureCredential  # slow import: only when needed

        credential = DefaultAzureCredential()
        scope = self.scope
        return lambda: credential.get_token(scope).token


def _config_file(flag: str | None) -> dict[str, Any]:
    path = Path(
        flag
        or os.environ.get("BENCHCTL_CONFIG")
        or Path.home() / ".config" / "benchctl" / "config.toml"
    )
    if not path.exists():
        if flag:
            raise CliError(f"--config {flag}: no such file", 2)
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise CliError(f"config file {path}: {e}", 2) from None
    unknown = set(data) - {"api_url", "api_key", "scope"}
    if unknown:
        raise CliError(f"config file {path}: unknown keys {', '.join(sorted(unknown))}", 2)
    return data


def resolve_connection(
    *,
    api_url: str | None = None,
    api_key: str | None = None,
    scope: str | None = None,
    config: str | None = None,
) -> Connection:
    file = _config_file(config)

    def pick(flag: str | None, env: str, key: str) -> str | None:
        value = flag or os.environ.get(env) or file.get(key)
        return str(value) if value else None

    url = pick(api_url, "BENCH_API_URL", "api_url")
    if url is None:
        stack = Stack.load()
        if stack is None:
            raise CliError(
                "no API: pass --api-url, set BENCH_API_URL, put api_url in the config file, "
                "or run `benchctl local up`",
                2,
            )
        url = stack.api_url
    return Connection(
        url, pick(api_key, "BENCH_API_KEY", "api_key"), pick(scope, "BENCH_API_SCOPE", "scope")
    )


def format_errors(body: Any) -> str:
    try:
        errors = body["errors"]
        return "\n".join(f"  {e['field']}: {e['message']}" for e in errors)
    except (KeyError, TypeError):
        return f"  {body}"


class Api:
    def __init__(self, connection: Connection | str, timeout: float = 30.0) -> None:
        conn = Connection(connection) if isinstance(connection, str) else connection
        self.base_url = conn.api_url.rstrip("/")
        self._token = conn.token_provider()
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, headers=conn.headers())

    def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        if self._token is not None:
            kw["headers"] = {**kw.get("headers", {}), "Authorization": f"Bearer {self._token()}"}
        try:
            r = self._http.request(method, path, **kw)
        except httpx.TransportError as e:
            raise ApiUnavailable(f"cannot reach the API at {self.base_url}: {e!r}") from e
        except httpx.HTTPError as e:
            raise CliError(f"cannot reach the API at {self.base_url}: {e}") from e
        if r.status_code >= 500 or r.status_code == 429:
            raise ApiUnavailable(f"API answered {r.status_code}: {r.text[:300]}")
        if r.status_code == 400:
            raise CliError("invalid request:\n" + format_errors(r.json()), 2)
        if r.status_code == 401:
            raise CliError("not signed in (401): give --api-key or --scope", 2)
        if r.status_code == 403:
            raise CliError("not allowed (403):\n" + format_errors(r.json()), 2)
        if r.status_code == 409:
            raise CliError("refused (409):\n" + format_errors(r.json()), 1)
        if r.status_code == 404:
            raise CliError(f"not found: {path}")
        if r.status_code >= 400:
            raise CliError(f"API answered {r.status_code}: {r.text[:500]}")
        return r

    def submit(self, body: dict[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        data: dict[str, Any] = self._call("POST", "/api/runs", json=body, headers=headers).json()
        return data

    def get(self, run_id: str, *, timeout: float | None = None) -> dict[str, Any]:
        kw: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        data: dict[str, Any] = self._call("GET", f"/api/runs/{run_id}", **kw).json()
        return data

    def agents(self, pool: str | None = None) -> dict[str, Any]:
        params = {"pool": pool} if pool else {}
        data: dict[str, Any] = self._call("GET", "/api/agents", params=params).json()
        return data

    def list(self, **params: Any) -> dict[str, Any]:
        clean = {k: v for k, v in params.items() if v is not None}
        data: dict[str, Any] = self._call("GET", "/api/runs", params=clean).json()
        return data

    def curves(self, run_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self._call("GET", f"/api/runs/{run_id}/curves").json()
        return data

    def profiles(self) -> Any:
        return self._call("GET", "/api/profiles").json()["profiles"]

    def regressions(self) -> Any:
        return self._call("GET", "/api/regressions").json()["regressions"]

    def schedules(self, method: str, path: str = "", body: Any = None) -> Any:
        r = self._call(method, f"/api/schedules{path}", json=body)
        return r.json() if r.content else None

    def compare(self, a: str, b: str) -> dict[str, Any]:
        data: dict[str, Any] = self._call("GET", "/api/compare", params={"a": a, "b": b}).json()
        return data

    def cancel(self, run_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self._call("DELETE", f"/api/runs/{run_id}").json()
        return data
