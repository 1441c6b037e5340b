"""HTTP client for the service API, as used by benchctl."""

from __future__ import annotations

import os
from typing import Any

import httpx

from benchctl.localstack import Stack


class CliError(Exception):
    """Ends the command with a message and an exit code."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def resolve_api_url(flag: str | None) -> str:
    if flag:
        return flag
    if os.environ.get("BENCH_API_URL"):
        return os.environ["BENCH_API_URL"]
    stack = Stack.load()
    if stack is not None:
        return stack.api_url
    raise CliError("no API: pass --api-url, set BENCH_API_URL, or run `benchctl local up`", 2)


def format_errors(body: Any) -> str:
    try:
        errors = body["errors"]
        return "\n".join(f"  {e['field']}: {e['message']}" for e in errors)
    except (KeyError, TypeError):
        return f"  {body}"


class Api:
    def __init__(self, base_url: str, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout)

    def _call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        try:
            r = self._http.request(method, path, **kw)
        except httpx.HTTPError as e:
            raise CliError(f"cannot reach the API at {self.base_url}: {e}") from e
        if r.status_code == 400:
            raise CliError("invalid request:\n" + format_errors(r.json()), 2)
        if r.status_code == 404:
            raise CliError(f"not found: {path}")
        if r.status_code >= 400:
            raise CliError(f"API answered {r.status_code}: {r.text[:500]}")
        return r

    def submit(self, body: dict[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        data: dict[str, Any] = self._call("POST", "/api/runs", json=body, headers=headers).json()
        return data

    def get(self, run_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self._call("GET", f"/api/runs/{run_id}").json()
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

    def cancel(self, run_id: str) -> dict[str, Any]:
        data: dict[str, Any] = self._call("DELETE", f"/api/runs/{run_id}").json()
        return data
