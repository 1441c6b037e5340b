"""Stored results and step aggregates for tests that care about a few of their fields: the
rest are filled with plain values (a step of one client reading, a host with no known VM
size), so each test states only what it is about."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.models import Result, StepAggregate
from core.models.views import RunView

RUN = "r-" + "0" * 32
_PERCENTILES = ("p50", "p90", "p99", "p99.9", "p99.99")


def _percentiles(given: Mapping[str, float] | None, default: float) -> dict[str, float]:
    """Every summary percentile: those not given take the next given below them."""
    out: dict[str, float] = {}
    last = default
    for p in _PERCENTILES:
        last = float((given or {}).get(p, last))
        out[p] = last
    return out


def _direction(given: Mapping[str, Any]) -> dict[str, Any]:
    iops = float(given["iops"])
    out: dict[str, Any] = {
        "iops": iops,
        "bw_bytes": float(given.get("bw_bytes", iops * 4096)),
        "clat_ns": _percentiles(given.get("clat_ns"), 1.0),
        "percentiles_basis": "whole-run",
        "total_ios": int(given.get("total_ios", 1)),
        "percentiles_exact": True,
        "lat_mean_ns": float(given.get("lat_mean_ns", 1.0)),
        "clat_mean_ns": 1.0,
        "slat_mean_ns": None,
    }
    if given.get("lat_ns") is not None:
        out["lat_ns"] = _percentiles(given["lat_ns"], 1.0)
    return out


def stored_aggregate(
    *,
    step: int = 0,
    clients: int = 1,
    workload: Mapping[str, Any] | None = None,
    read: Mapping[str, Any] | None = None,
    write: Mapping[str, Any] | None = None,
    run_id: str = RUN,
    **fields: Any,
) -> StepAggregate:
    """A step's aggregate; ``read`` and ``write`` need only ``iops`` (percentiles not
    given are 1 ns)."""
    doc: dict[str, Any] = {
        "id": f"{run_id}.s{step}",
        "run_id": run_id,
        "step": step,
        "target": "t",
        "created_at": "2031-01-01T00:00:00.000Z",
        "mode": "measure",
        "point": "",
        "repetition": 0,
        "discarded": False,
        "workload": dict(workload or {}),
        "like_key": "",
        "comparison_key": "k",
        "clients": clients,
        "clients_expected": clients,
        "partial": False,
        "failed_clients": [],
        "basis": "whole-run",
        "window": None,
        "per_client": [],
        "spread": None,
        "scaling_efficiency": None,
        "littles_law": None,
        "start_skew_ms": None,
        "ceilings": [],
        "bound_by": {
            "kind": "none",
            "name": "no limit known",
            "limit": None,
            "measured": None,
            "utilisation": None,
        },
        **fields,
    }
    if read is not None:
        doc["read"] = _direction(read)
    if write is not None:
        doc["write"] = _direction(write)
    return StepAggregate.model_validate(doc)


def stored_result(
    *,
    step: int = 0,
    client: int = 0,
    started_at_ms: int = 0,
    host: Mapping[str, Any] | None = None,
    mounts: Sequence[Mapping[str, Any]] = (),
    run_id: str = RUN,
) -> Result:
    """A client's result, of which only its time, host and mounts are given."""
    item = f"{run_id}.s{step}.c{client}"
    return Result.model_validate(
        {
            "id": item,
            "run_id": run_id,
            "item_id": item,
            "step": step,
            "client": client,
            "agent_id": f"agent-{client}",
            "engine": "fio",
            "engine_version": "fio-3.33",
            "targets": [m["alias"] for m in mounts] or ["t"],
            "workload": {},
            "started_at_ms": started_at_ms,
            "ended_at_ms": started_at_ms + 1000,
            "host": {"hostname": "h", "kernel": "k", "os": "o", "cpu_count": 1, **(host or {})},
            "mounts": [
                {"path": f"/mnt/{m['alias']}", "mount_point": f"/mnt/{m['alias']}", **m}
                for m in mounts
            ],
        }
    )


def run_view(**given: Any) -> RunView:
    """A run's view (GET /api/runs/{id}) with ``given`` fields over plain defaults: what the
    chat's cards and the baseline read, without a stored run behind it."""
    base: dict[str, Any] = {
        "id": RUN,
        "state": "completed",
        "created_at": "2026-11-27T00:00:00+00:00",
        "updated_at": None,
        "target": "t",
        "targets": ["t"],
        "pool": "default",
        "tags": {},
        "request": {"target": "t", "profile": "smoke-randread-4k"},
        "items_total": 1,
        "engine": "fio",
        "profile": None,
        "profile_version": None,
        "workload": {},
        "comparison_key": "k",
        "fill": False,
        "step_count": 1,
        "error": None,
        "cancel_requested": False,
        "requested_by": {"name": "me", "role": "runner"},
        "provisioning": None,
        "gate": None,
        "usage": {"agent_s": 0.0, "items": 0, "price_per_hour": None, "cost": None},
        "steps": [],
        "items": [],
        "aggregate": None,
    }
    return RunView.model_validate({**base, **given})
