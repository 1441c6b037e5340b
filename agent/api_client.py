"""The agent's calls to the service API (agents hold no database rights)."""

from __future__ import annotations

from typing import Any

import httpx

from core.errors import BenchError, StoreUnavailable
from core.models import WorkItem


class ApiError(BenchError):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"API answered {status}: {body[:500]}")
        self.status = status


class ApiClient:
    def __init__(
        self, base_url: str, *, token_provider: Any = None, timeout: float = 30.0, retries: int = 3
    ) -> None:
        transport = httpx.HTTPTransport(retries=retries)  # connection-level retries
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"), timeout=timeout, transport=transport
        )
        self._token = token_provider

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token()}"} if self._token else {}

    def _call(self, method: str, path: str, body: Any) -> dict[str, Any]:
        try:
            r = self._http.request(method, path, json=body, headers=self._headers())
        except httpx.HTTPError as e:
            raise StoreUnavailable(f"API unreachable: {e}") from e
        if r.status_code >= 500:
            raise StoreUnavailable(f"API answered {r.status_code}: {r.text[:300]}")
        if r.status_code >= 400:
            raise ApiError(r.status_code, r.text)
        data: dict[str, Any] = r.json()
        return data

    def claim(
        self, item: WorkItem, agent_id: str, dequeue_count: int, message_id: str
    ) -> dict[str, Any]:
        return self._call(
            "POST",
            "/api/agent/claim",
            {
                "work_item": item.model_dump(mode="json"),
                "agent_id": agent_id,
                "dequeue_count": dequeue_count,
                "message_id": message_id,
            },
        )

    def _ref(self, item: WorkItem, agent_id: str) -> dict[str, str]:
        return {"run_id": item.run_id, "item_id": item.item_id, "agent_id": agent_id}

    def ready(self, item: WorkItem, agent_id: str) -> dict[str, Any]:
        return self._call("POST", "/api/agent/ready", self._ref(item, agent_id))

    def barrier(self, item: WorkItem, agent_id: str) -> dict[str, Any]:
        return self._call("POST", "/api/agent/barrier", self._ref(item, agent_id))

    def heartbeat(self, item: WorkItem, agent_id: str) -> bool:
        r = self._call(
            "POST",
            "/api/agent/heartbeat",
            {"run_id": item.run_id, "item_id": item.item_id, "agent_id": agent_id},
        )
        return bool(r.get("cancel"))

    def failure(
        self, item: WorkItem, agent_id: str, message: str, *, permanent: bool = False
    ) -> bool:
        """Reports a failed attempt; True when it is final (delete the message). A
        ``permanent`` failure (no retry can succeed: no space, no such mount, no engine)
        is final at once."""
        body = {**self._ref(item, agent_id), "message": message, "permanent": permanent}
        return bool(self._call("POST", "/api/agent/failure", body).get("final"))

    def cancelled(self, item: WorkItem, agent_id: str) -> None:
        self._call(
            "POST",
            "/api/agent/cancelled",
            {"run_id": item.run_id, "item_id": item.item_id, "agent_id": agent_id},
        )

    def put_artifact(self, item: WorkItem, name: str, data: bytes) -> None:
        try:
            r = self._http.put(
                f"/api/agent/artifacts/{item.item_id}/{name}",
                content=data,
                headers={**self._headers(), "Content-Type": "application/gzip"},
            )
        except httpx.HTTPError as e:
            raise StoreUnavailable(f"API unreachable: {e}") from e
        if r.status_code >= 500:
            raise StoreUnavailable(f"API answered {r.status_code}: {r.text[:300]}")
        if r.status_code >= 400:
            raise ApiError(r.status_code, r.text)

    def put_result(self, result: dict[str, Any]) -> dict[str, Any]:
        return self._call("PUT", f"/api/agent/results/{result['item_id']}", result)

    def close(self) -> None:
        self._http.close()
