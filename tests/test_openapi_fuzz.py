"""Schemathesis against the running API: every operation of the OpenAPI document, with
generated inputs, finds no server error and no answer the document does not describe."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from benchctl.localstack import Stack
from tests.conftest import FUZZ_POOL, FUZZ_TARGET

ROOT = Path(__file__).resolve().parent.parent
CHECKS = "not_a_server_error,status_code_conformance,response_schema_conformance,"
CHECKS += "content_type_conformance"
# Fixed, so make test is reproducible; SCHEMATHESIS_SEED=random explores further.
SEED = os.environ.get("SCHEMATHESIS_SEED", "20261123")
MIN_CASES = 1000


def fuzz_leftovers(api: httpx.Client, schedules_before: set[str]) -> None:
    """What Schemathesis created: schedules (deleted) and runs on the fuzz target (cancelled,
    so none stays waiting in the listings other tests read)."""
    for s in api.get("/api/schedules").json()["schedules"]:
        if s["id"] not in schedules_before:
            api.delete(f"/api/schedules/{s['id']}")
        elif s["request"].get("pool") == FUZZ_POOL and s["enabled"]:
            api.patch(f"/api/schedules/{s['id']}", json={"enabled": False})
    for state in ("waiting", "queued", "running"):
        for _ in range(100):  # pages of 50; a cancelled run leaves these states at once
            listed = api.get("/api/runs", params={"state": state, "target": FUZZ_TARGET})
            if not listed.json()["runs"]:
                break
            for run in listed.json()["runs"]:
                api.delete(f"/api/runs/{run['id']}")


def test_schemathesis_finds_no_failure(stack: Stack, api: httpx.Client, tmp_path: Path) -> None:
    schedules_before = {s["id"] for s in api.get("/api/schedules").json()["schedules"]}
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks",
        "PYTHONPATH": str(ROOT),
    }
    binary = Path(sys.executable).parent / "schemathesis"
    argv = [str(binary), "run", f"{stack.api_url}/api/openapi.json"]
    argv += ["--url", stack.api_url, "--checks", CHECKS, "--seed", SEED]
    argv += ["--max-examples", "15", "--workers", "1", "--no-color"]
    argv += ["--phases", "examples,coverage,fuzzing,stateful"]
    argv += ["--generation-database", "none", "--request-timeout", "30"]
    argv += ["--report", "json", "--report-dir", str(tmp_path)]
    # Run in tmp_path: Schemathesis keeps a crash cache (.schemathesis/) in its directory.
    (tmp_path / "schemathesis.toml").write_text("[cache]\nenabled = false\n")
    started = time.monotonic()
    try:
        out = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
    finally:
        fuzz_leftovers(api, schedules_before)
    took = time.monotonic() - started
    output = out.stdout[-6000:] + out.stderr[-2000:]
    report = json.loads(next(tmp_path.glob("json-*.json")).read_text())
    print(f"schemathesis: {report['test_cases']} in {took:.0f} s, seed {SEED}")
    assert out.returncode == 0, output
    assert report["failures"] == [] and report["errors"] == [], output
    assert report["operations"]["tested"] == report["operations"]["total"] >= 29, output
    assert report["test_cases"]["generated"] >= MIN_CASES, output
    assert report["test_cases"]["with_failures"] == report["test_cases"]["errored"] == 0
