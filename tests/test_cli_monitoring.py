"""benchctl's monitoring commands against the real API: schedules as tables, the regressions
found and their triage (benchctl regressions, benchctl triage)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from adapters.cosmos import CosmosStore
from benchctl.localstack import Stack
from core.models.stored import Run
from core.monitoring.monitor import Monitor
from tests.conftest import FUZZ_TARGET
from tests.documents import stored_aggregate, stored_result
from tests.test_cli_inputs import run_main


def cli(stack: Stack, *argv: str) -> tuple[int, str, str]:
    return run_main(["--api-url", stack.api_url, *argv])


def test_schedules_print_tables(stack: Stack, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("COLUMNS", "100")  # a terminal of 100 columns
    request = tmp_path / "run.json"
    request.write_text(json.dumps({"profile": "smoke-randread-4k", "target": FUZZ_TARGET}))
    name = f"nightly-{uuid.uuid4().hex[:6]}"
    create = ["schedule", "create", "--cron", "0 3 * * *", "--owner", "ci", "--disabled"]
    code, out, err = cli(stack, *create, "--request", str(request), "--name", name)
    assert code == 0, err
    assert not out.lstrip().startswith("{")  # a table, not JSON
    sched_id = next(w for w in out.split() if w.startswith("sch-"))
    assert name in out and "0 3 * * *" in out and "smoke-randread-4k on fuzz" in out
    code, out, _ = cli(stack, "schedule", "list")
    assert code == 0 and sched_id in out and name in out  # the id whole: it is typed
    code, out, _ = cli(stack, "schedule", "enable", sched_id)
    assert code == 0 and "yes" in out and "03:00 UTC" in out
    code, out, _ = cli(stack, "schedule", "show", sched_id, "--format", "json")
    assert json.loads(out)["enabled"] is True
    assert cli(stack, "schedule", "disable", sched_id)[0] == 0
    code, out, _ = cli(stack, "schedule", "delete", sched_id)
    assert code == 0 and out.strip() == f"deleted {sched_id}"
    code, _, err = cli(stack, "schedule", "show", sched_id)
    assert code == 1 and "not found" in err


def _slowdown(store: CosmosStore, target: str) -> list[str]:
    """Six steady runs, then two slowed ones, recorded as the timer records them."""
    mon = Monitor(store, gate_pct=10)
    ids = []
    for i, iops in enumerate([50_000, 50_400, 49_800, 50_100, 50_300, 49_900, 20_000, 20_100]):
        run_id = f"r-{uuid.uuid4().hex}"
        ids.append(run_id)
        run = SimpleNamespace(
            id=run_id, engine="fio", targets=[target], target=target, target_facts=None, tags={}
        )
        agg = stored_aggregate(
            workload={"rw": "randread", "bs": "4k"},  # the series is the target's own
            read={
                "iops": iops,
                "bw_bytes": iops * 4096,
                "clat_ns": {"p50": 1, "p99": 2e5, "p99.9": 3},
            },
            run_id=run_id,
        )
        result = stored_result(
            started_at_ms=1_700_000_000_000 + i * 60_000,
            mounts=[{"alias": target, "fstype": "ext4", "source": "/dev/x", "options": ""}],
            run_id=run_id,
        )
        mon.record(cast(Run, run), [agg], [result])
    return ids


def test_regressions_are_listed_and_triaged(stack: Stack, store: CosmosStore) -> None:
    target = f"t{uuid.uuid4().hex[:8]}"
    runs = _slowdown(store, target)
    code, out, err = cli(stack, "regressions", "--target", target, "--format", "json")
    assert code == 0, err
    found = json.loads(out)["regressions"]
    assert {r["first_run_id"] for r in found} == {runs[6]}  # one event
    assert {r["metric"] for r in found} >= {"read.iops", "read.bw_bytes"}
    code, out, _ = cli(stack, "regressions", "--target", target, "--state", "new")
    assert code == 0 and all(r["id"] in out for r in found)  # whole ids, to be typed
    # Accept the change: every open regression first seen on that run.
    code, out, err = cli(stack, "triage", "--run", runs[6], "--state", "expected")
    assert code == 0 and "triaged: expected" in out, err
    code, out, _ = cli(stack, "regressions", "--target", target, "--format", "json")
    assert {r["state"] for r in json.loads(out)["regressions"]} == {"expected"}
    one = found[0]["id"]
    code, out, _ = cli(stack, "triage", one, "--state", "fixed", "--format", "json")
    assert code == 0 and json.loads(out)["regressions"][0]["state"] == "fixed"
    code, _, err = cli(stack, "triage", "--run", runs[6], "--state", "fixed")
    assert code == 1 and "no open regression" in err + _
    code, _, err = cli(stack, "triage", "nosuch.read.iops.gate.x", "--state", "fixed")
    assert code == 1 and "not found" in err
    code, _, err = cli(stack, "triage", one, "--state", "bogus")
    assert code == 2 and "--state" in err
