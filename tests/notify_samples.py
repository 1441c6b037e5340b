"""What the notification tests send: a regression as the monitor stores it, the service's
base URL and a webhook secret."""

from __future__ import annotations

from typing import Any

BASE_URL = "https://bench.example.test/"
SECRET = b"s3cret-for-tests"
REGRESSION: dict[str, Any] = {
    "id": "reg-0001",
    "series_key": "3f2a9c",
    "metric": "read.iops",
    "kind": "regression",
    "before": {"mean": 50000.0, "std": 900.0},
    "after": {"mean": 25000.0, "std": 700.0},
    "change_pct": -50.0,
    "pvalue": 1e-9,
    "first_run_id": "r-0042",
    "runs_around": ["r-0040", "r-0041", "r-0042", "r-0043"],
    "target": "scratch",
    "detected_at": "2026-11-22T03:40:00.000Z",
}
