"""HTTP client for the service API, as used by benchctl.

Where to connect and how to sign in come from, in this order: flags, environment
(BENCH_API_URL, BENCH_API_KEY, BENCH_API_SCOPE), a config file (--config, $BENCHCTL_CONFIG
or ~/.config/benchctl/config.toml: ``api_url``, ``api_key``, ``scope``), and finally the
local stack. With a scope, benchctl gets an Entra ID token from azure-identity's
DefaultAzureCredential: a pipeline's workload identity, a managed identity, or `az login`;
the shared transport (``apiclient``) keeps it until it nears expiry.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from apiclient import Refused, Transport, Unavailable
from benchctl.local_state import running

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential


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

    def door(self) -> str:
        return "pipeline" if any(os.environ.get(v) for v in CI_VARIABLES) else "cli"

    def credential(self) -> TokenCredential | None:
        if not self.scope:
            return None
        from azure.identity import DefaultAzureCredential  # slow import: only when needed

        return DefaultAzureCredential()


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
    except (OSError, ValueError) as e:  # TOMLDecodeError and UnicodeDecodeError are
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
        stack = running()
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


def _refusal(e: Refused, path: str) -> CliError:
    """A 4xx as the command's message and exit code."""
    body = e.body if e.body is not None else e.text
    if e.status == 400:
        return CliError("invalid request:\n" + format_errors(body), 2)
    if e.status == 401:
        return CliError("not signed in (401): give --api-key or --scope", 2)
    if e.status == 403:
        return CliError("not allowed (403):\n" + format_errors(body), 2)
    if e.status == 409:
        return CliError("refused (409):\n" + format_errors(body), 1)
    if e.status == 404:
        return CliError(f"not found: {path}")
    return CliError(f"API answered {e.status}: {e.text[:500]}")


def format_errors(body: Any) -> str:
    try:
        errors = body["errors"]
        return "\n".join(f"  {e['field']}: {e['message']}" for e in errors)
    except (KeyError, TypeError):
        return f"  {body}"


class Api:
    def __init__(
        self,
        connection: Connection | str,
        timeout: float = 30.0,
        *,
        credential: TokenCredential | None = None,  # default: the connection's
    ) -> None:
        conn = Connection(connection) if isinstance(connection, str) else connection
        self.base_url = conn.api_url.rstrip("/")
        try:
            self._transport = Transport(
                self.base_url,
                api_key=conn.api_key,
                door=conn.door(),
                credential=credential or conn.credential(),
                scope=conn.scope,
                timeout=timeout,
            )
        except ValueError as e:  # a token over plain http to another host
            raise CliError(str(e), 2) from None

    def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            return self._transport.request(method, path, **kw)
        except Unavailable as e:
            raise ApiUnavailable(str(e)) from e
        except Refused as e:
            raise _refusal(e, path) from None
        except httpx.HTTPError as e:
            raise CliError(f"cannot reach the API at {self.base_url}: {e}") from e

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        """The answer's JSON; anything else is not this service answering."""
        r = self._call(method, path, **kw)
        try:
            return r.json()
        except ValueError:
            kind = r.headers.get("content-type", "no content type")
            raise CliError(
                f"{method} {self.base_url}{path} answered {r.status_code} with {kind}, not "
                "JSON: is this the benchmark service's URL?"
            ) from None

    def close(self) -> None:
        self._transport.close()

    def submit(self, body: dict[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        data: dict[str, Any] = self._json("POST", "/api/runs", json=body, headers=headers)
        return data

    def get(self, run_id: str, *, timeout: float | None = None) -> dict[str, Any]:
        kw: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        data: dict[str, Any] = self._json("GET", f"/api/runs/{run_id}", **kw)
        return data

    def live(self, run_id: str, *, seconds: int = 1, timeout: float | None = None) -> Any:
        """The run's live figures (GET /api/runs/{id}/live): the last ``seconds`` seconds."""
        kw: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        return self._json("GET", f"/api/runs/{run_id}/live", params={"seconds": seconds}, **kw)

    def agents(self, pool: str | None = None) -> dict[str, Any]:
        params = {"pool": pool} if pool else {}
        data: dict[str, Any] = self._json("GET", "/api/agents", params=params)
        return data

    def list(self, **params: Any) -> dict[str, Any]:
        clean = {k: v for k, v in params.items() if v is not None}
        data: dict[str, Any] = self._json("GET", "/api/runs", params=clean)
        return data

    def curves(self, run_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self._json("GET", f"/api/runs/{run_id}/curves")
        return data

    def profiles(self) -> Any:
        return self._json("GET", "/api/profiles")["profiles"]

    def regressions(self, state: str | None = None) -> Any:
        params = {"state": state} if state else {}
        return self._json("GET", "/api/regressions", params=params)["regressions"]

    def triage(self, series_key: str, regression_id: str, state: str) -> dict[str, Any]:
        path = f"/api/regressions/{series_key}/{regression_id}"
        data: dict[str, Any] = self._json("PATCH", path, json={"state": state})
        return data

    def schedules(self, method: str, path: str = "", body: Any = None) -> Any:
        r = self._call(method, f"/api/schedules{path}", json=body)
        return r.json() if r.content else None

    def compare(self, a: str, b: str) -> dict[str, Any]:
        data: dict[str, Any] = self._json("GET", "/api/compare", params={"a": a, "b": b})
        return data

    def run_report(self, run_id: str) -> str:
        return self._call("GET", f"/api/runs/{run_id}/report").text

    def compare_report(self, run_ids: Sequence[str]) -> str:
        return self._call("GET", "/api/compare/report", params={"run": list(run_ids)}).text

    def series_report(self, key: str) -> str:
        return self._call("GET", f"/api/series/{key}/report").text

    def result(self, run_id: str, item_id: str, window: str = "own") -> dict[str, Any]:
        path = f"/api/runs/{run_id}/results/{item_id}"
        data: dict[str, Any] = self._json("GET", path, params={"window": window})
        return data

    def cancel(self, run_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self._json("DELETE", f"/api/runs/{run_id}")
        return data

    def clean(self, target: str, pool: str | None = None) -> dict[str, Any]:
        body = {"pool": pool} if pool else {}
        r = self._call("POST", f"/api/targets/{target}/clean", json=body)
        data: dict[str, Any] = r.json()
        return data
