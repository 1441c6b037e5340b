"""Who may do what: API keys and App Service Authentication's principal, caller roles,
read-only targets, the door each run came through; benchctl's config file and formats. Through
the API; the rules alone, without a server: tests/test_auth_rules.py."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from benchctl import localstack
from benchctl.localstack import Stack
from tests.auth_headers import principal
from tests.conftest import FUZZ_AGENT_POOL, TEST_TARGETS, AgentFactory, run_body

KEYS = {
    "ci": ("engineer", "ci-key-0123456789abcdef"),
    "chat": ("runner", "runner-key-0123456789ab"),
    "viewer": ("reader", "reader-key-0123456789ab"),
    "vm1": ("agent", "agent-key-0123456789abcd"),
}


def key(name: str) -> dict[str, str]:
    return {"X-Api-Key": KEYS[name][1]}


@pytest.fixture(scope="module")
def keyed(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A second API process on the same emulators, with API keys required."""
    st = dataclasses.replace(
        stack, dir=str(tmp_path_factory.mktemp("keyed")), api_port=localstack.free_port(), procs=[]
    )
    env = {
        "BENCH_API_KEYS": ",".join(f"{n}:{r}:{k}" for n, (r, k) in KEYS.items()),
        "BENCH_TARGETS": json.dumps(TEST_TARGETS),
    }
    p = localstack.start_api(st, timer_seconds=0, extra_env=env)
    yield st
    localstack.stop_proc(p, timeout=5)


def test_every_route_but_health_needs_a_key(keyed: Stack) -> None:
    with httpx.Client(base_url=keyed.api_url, timeout=30) as c:
        assert c.get("/api/health").status_code == 200
        assert c.get("/api/openapi.json").status_code == 200
        for method, path in (("GET", "/api/runs"), ("POST", "/api/runs"), ("GET", "/api/targets")):
            r = c.request(method, path)
            assert r.status_code == 401, path
            assert r.json()["errors"][0]["field"] == "(auth)"
        bad = c.get("/api/runs", headers={"X-Api-Key": "x" * 24})
        assert bad.status_code == 401
        assert c.get("/api/runs", headers=key("viewer")).status_code == 200


def test_roles_limit_clients_writes_and_management(keyed: Stack, pool: str) -> None:
    with httpx.Client(base_url=keyed.api_url, timeout=30) as c:
        r = c.post("/api/runs", json=run_body(pool), headers=key("viewer"))
        assert r.status_code == 403 and "reader may not start runs" in r.text

        too_big = {**run_body(pool), "clients": 8}
        r = c.post("/api/runs", json=too_big, headers=key("chat"))
        assert r.status_code == 403
        assert r.json()["errors"] == [
            {"field": "clients", "message": "role runner may use at most 4"}
        ]
        r = c.post("/api/runs", json=run_body(pool, rw="randwrite"), headers=key("chat"))
        assert r.status_code == 403
        assert r.json()["errors"][0]["field"] == "workload.rw"

        golden = {**run_body(pool, rw="randwrite"), "target": "golden"}
        r = c.post("/api/runs", json=golden, headers=key("ci"))
        assert r.status_code == 403
        err = r.json()["errors"][0]
        assert err["field"] == "target"
        assert err["message"].startswith("target golden is read-only: this run writes")
        fill = {**run_body(pool), "target": "golden", "fill": True}
        r = c.post("/api/runs", json=fill, headers=key("ci"))
        assert r.status_code == 403 and r.json()["errors"][0]["field"] == "target"
        unknown = {**run_body(pool), "target": "nowhere"}
        r = c.post("/api/runs", json=unknown, headers=key("ci"))
        assert r.status_code == 400 and r.json()["errors"][0]["field"] == "target"

        sched = {"cron": "0 3 * * *", "owner": "x", "request": run_body(pool)}
        assert c.post("/api/schedules", json=sched, headers=key("chat")).status_code == 403
        # Agents' routes take agents only; an agent key passes (and then meets validation).
        assert c.post("/api/agent/claim", json={}, headers=key("ci")).status_code == 403
        assert c.post("/api/agent/claim", json={}, headers=key("vm1")).status_code == 400
        assert c.get("/api/runs", params={"limit": 1}, headers=key("vm1")).status_code == 200

        # A read run within the runner's limits goes through, recorded with who and how.
        ok = c.post(
            "/api/runs", json=run_body(pool), headers={**key("chat"), "X-Bench-Door": "pipeline"}
        )
        assert ok.status_code == 202, ok.text
        run = c.get(f"/api/runs/{ok.json()['id']}", headers=key("viewer")).json()
        assert run["requested_by"] == {"name": "chat", "role": "runner", "door": "pipeline"}
        # A caller cannot claim the scheduler's door.
        again = c.post(
            "/api/runs", json=run_body(pool), headers={**key("ci"), "X-Bench-Door": "schedule"}
        )
        run2 = c.get(f"/api/runs/{again.json()['id']}", headers=key("viewer")).json()
        assert run2["requested_by"] == {"name": "ci", "role": "engineer", "door": "api"}
        for run_id in (run["id"], run2["id"]):
            assert c.delete(f"/api/runs/{run_id}", headers=key("viewer")).status_code == 403
            assert c.delete(f"/api/runs/{run_id}", headers=key("ci")).status_code == 202


def benchctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchctl", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "BENCH_API_URL": "", "BENCH_API_KEY": "", **(env or {})},
    )


def test_benchctl_config_file_markdown_and_compare(
    keyed: Stack, agents: AgentFactory, pool: str, tmp_path: Path
) -> None:
    agents()
    cfg = tmp_path / "benchctl.toml"
    cfg.write_text(f'api_url = "{keyed.api_url}"\napi_key = "{KEYS["ci"][1]}"\n')
    run_args = [
        "run",
        "--target",
        "scratch",
        "--pool",
        pool,
        "--set",
        "runtime=2",
        "--set",
        "size=8m",
        "--set",
        "iodepth=4",
        "--tag",
        "commit=abc123",
        "--wait",
    ]
    ids = []
    for _ in range(2):
        r = benchctl("--config", str(cfg), *run_args, "--format", "markdown", env={"CI": "true"})
        assert r.returncode == 0, r.stderr
        md = r.stdout
        assert md.startswith("### ✅ Benchmark on `scratch`: completed")
        assert "requested by ci via pipeline" in md and "`commit=abc123`" in md
        header = "| step | point | clients | dir | IOPS | MiB/s "
        header += "| total p50 | total p99 | total p99.9 |"
        assert header + " percentiles |" in md and "| common window |" in md
        assert "| 0 | - | 1 | read |" in md
        ids.append(md.split("Run `")[1].split("`")[0])

    r = benchctl("--config", str(cfg), "compare", *ids, "--format", "json")
    assert r.returncode == 0, r.stderr
    cmp = json.loads(r.stdout)
    assert cmp["comparable"] is True and cmp["a"]["id"] == ids[0]
    iops = next(row for row in cmp["rows"] if row["metric"] == "read.iops")
    assert iops["delta_pct"] == pytest.approx(100 * (iops["b"] - iops["a"]) / iops["a"])
    assert iops["verdict"] == "no noise estimate"  # two runs are not a series yet
    r = benchctl("--config", str(cfg), "compare", *ids, "--format", "markdown")
    assert "| metric | A | B | Δ | noise (1 sd) | verdict |" in r.stdout
    assert "| read.iops |" in r.stdout

    # Without a key: exit 2 and why; a flag beats the config file.
    r = benchctl("--api-url", keyed.api_url, "list")
    assert r.returncode == 2 and "not signed in" in r.stderr
    r = benchctl("--config", str(cfg), "--api-key", "y" * 24, "list")
    assert r.returncode == 2
    r = benchctl("--config", str(cfg), "list", env={"BENCH_API_KEY": "z" * 24})
    assert r.returncode == 2  # the environment beats the file too
    bad = tmp_path / "bad.toml"
    bad.write_text('api_url = "x"\npassword = "p"\n')
    r = benchctl("--config", str(bad), "list")
    assert r.returncode == 2 and "unknown keys password" in r.stderr
    r = benchctl("--config", str(cfg), *run_args[:-1], "--set", "iodepth=0")
    assert r.returncode == 2 and "workload.iodepth" in r.stderr


@pytest.fixture(scope="module")
def easyauth(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A second API process trusting X-MS-CLIENT-PRINCIPAL, as behind App Service
    Authentication in Azure, with the default BENCH_DEFAULT_ROLE (none)."""
    st = dataclasses.replace(
        stack,
        dir=str(tmp_path_factory.mktemp("easyauth")),
        api_port=localstack.free_port(),
        procs=[],
    )
    env = {"BENCH_TRUST_EASYAUTH": "1", "BENCH_TARGETS": json.dumps(TEST_TARGETS)}
    p = localstack.start_api(st, timer_seconds=0, extra_env=env)
    yield st
    localstack.stop_proc(p, timeout=5)


def test_no_app_role_gets_403_on_everything_but_health(easyauth: Stack, pool: str) -> None:
    def as_(roles: list[str]) -> dict[str, str]:
        return {
            "X-MS-CLIENT-PRINCIPAL": principal([("roles", r) for r in roles]),
            "X-MS-CLIENT-PRINCIPAL-ID": "oid-someone",
            "X-MS-CLIENT-PRINCIPAL-NAME": "someone@contoso.com",
        }

    with httpx.Client(base_url=easyauth.api_url, timeout=30) as c:
        assert c.get("/api/health").status_code == 200
        assert c.get("/api/runs").status_code == 401  # no principal: not signed in
        routes = [
            ("GET", "/api/runs", None),
            ("POST", "/api/runs", run_body(pool)),
            ("GET", "/api/targets", None),
            ("GET", "/api/schedules", None),
            ("POST", "/api/agent/claim", {}),
        ]
        for method, path, body in routes:
            r = c.request(method, path, json=body, headers=as_([]))
            assert r.status_code == 403, (path, r.text)
            assert r.json()["errors"] == [
                {
                    "field": "(caller)",
                    "message": "someone@contoso.com has no Bench.* app role for this API",
                }
            ]
        # With an app role the same caller reads, and the role's limits apply.
        assert c.get("/api/runs", headers=as_(["Bench.Reader"])).status_code == 200
        r = c.post("/api/runs", json=run_body(pool), headers=as_(["Bench.Reader"]))
        assert r.status_code == 403 and "reader may not start runs" in r.text


def test_an_agent_registers_only_as_itself(keyed: Stack) -> None:
    """The registry (issue 18): a per-agent key registers its own id, no other."""
    reg = {"agent_id": "vm1", "pool": FUZZ_AGENT_POOL, "session": "a" * 32}
    with httpx.Client(base_url=keyed.api_url, timeout=30) as c:
        as_other = c.post(
            "/api/agent/register", json={**reg, "agent_id": "vm2"}, headers=key("vm1")
        )
        assert as_other.status_code == 403
        assert as_other.json()["errors"][0]["field"] == "agent_id"
        by_person = c.post("/api/agent/register", json=reg, headers=key("ci"))
        assert by_person.status_code == 403  # agents only
        assert c.post("/api/agent/register", json=reg, headers=key("vm1")).status_code == 200
        listed = c.get("/api/agents", params={"pool": FUZZ_AGENT_POOL}, headers=key("viewer"))
        assert "vm1" in {a["id"] for a in listed.json()["agents"]}
        assert "vm2" not in {a["id"] for a in listed.json()["agents"]}
