"""fio's reserved section names are refused at every door (issue 12, point 8).

A mount alias names its section in the job file, and fio reads every section whose name
starts with "global" as the [global] section. fio itself is the reference here: its
``--showcmd`` prints the jobs it would run, without running them.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from adapters.config import ConfigError, Settings
from agent.__main__ import main as agent_main
from agent.config import AgentConfig, MountSpec
from core.engines.fio_job import job_file
from core.models import Workload, check_alias
from core.runs.guardrails import parse_targets
from tests.conftest import run_body

RESERVED = ["global", "global-vol", "globalx", "global0"]
ALLOWED = ["glob", "globe", "globa", "g", "my-global", "scratch"]


def fio_jobs(job_text: str, tmp_path: Path) -> str:
    path = tmp_path / "job.fio"
    path.write_text(job_text)
    out = subprocess.run(["fio", "--showcmd", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.fio
def test_fio_reads_any_section_starting_with_global_as_its_global_section(
    tmp_path: Path,
) -> None:
    # Why the rule is a prefix: the job file the old code wrote for an alias "globalx".
    text = job_file(Workload(), directories={"vol": str(tmp_path)}, log_prefix="/tmp/x")
    assert "--name=vol " in fio_jobs(text, tmp_path)
    swallowed = fio_jobs(text.replace("[vol]", "[globalx]"), tmp_path)
    assert "--name=" not in swallowed  # no job at all: its options went to [global]


@pytest.mark.fio
@pytest.mark.parametrize("alias", ALLOWED)
def test_allowed_aliases_are_one_job_section_each(alias: str, tmp_path: Path) -> None:
    text = job_file(Workload(), directories={alias: str(tmp_path)}, log_prefix="/tmp/x")
    assert text.count("[global]") == 1
    assert f"--name={alias} " in fio_jobs(text, tmp_path)


@pytest.mark.parametrize("alias", RESERVED)
def test_job_file_refuses_reserved_aliases(alias: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="reserved"):
        job_file(Workload(), directories={alias: str(tmp_path)}, log_prefix="/tmp/x")
    with pytest.raises(ValueError, match="reserved"):
        check_alias(alias)


@pytest.mark.parametrize("alias", RESERVED)
def test_agent_refuses_a_reserved_mount_alias(
    alias: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError, match="reserved"):
        mounts = {alias: MountSpec(path=str(tmp_path))}
        AgentConfig(api_url="http://x", queue_uri="http://y", mounts=mounts)
    # benchagent's own entry point (`sys.exit(main())`), in this process: it refuses before
    # it reaches for a queue, an API or fio, so no agent process need start (the fio lane).
    nowhere = "http://127.0.0.1:9"
    argv = ["--api-url", nowhere, "--queue-uri", nowhere, "--once"]
    assert agent_main([*argv, "--mount", f"{alias}={tmp_path}"]) == 2
    assert "reserved" in capsys.readouterr().err


@pytest.mark.parametrize("alias", RESERVED)
def test_target_registry_refuses_a_reserved_alias(alias: str) -> None:
    with pytest.raises(ValueError, match="reserved"):
        parse_targets(f'[{{"alias": "{alias}", "pool": "default"}}]')
    with pytest.raises(ConfigError, match="BENCH_TARGETS"):
        Settings.from_env(
            {
                "BENCH_QUEUE_URI": "https://acct.queue.core.windows.net",
                "BENCH_COSMOS_ENDPOINT": "https://acct.documents.azure.com",
                "BENCH_BLOB_URI": "https://acct.blob.core.windows.net",
                "BENCH_TARGETS": f'[{{"alias": "{alias}"}}]',
            }
        )


def test_api_refuses_reserved_aliases_in_runs_and_schedules(api: httpx.Client, pool: str) -> None:
    body = run_body(pool)
    body["target"] = "global"
    r = api.post("/api/runs", json=body)
    assert r.status_code == 400
    assert [e["field"] for e in r.json()["errors"]] == ["target"]
    assert "global" in r.json()["errors"][0]["message"]

    body = run_body(pool)
    del body["target"]
    body["targets"] = ["scratch", "global-vol"]
    r = api.post("/api/runs", json=body)
    assert r.status_code == 400
    assert [e["field"] for e in r.json()["errors"]] == ["targets.1"]

    body = run_body(pool)
    body["target"] = "globalx"
    r = api.post("/api/schedules", json={"cron": "0 3 * * *", "owner": "t", "request": body})
    assert r.status_code == 400
    assert [e["field"] for e in r.json()["errors"]] == ["request.target"]
    runs = api.get("/api/runs", params={"target": "globalx"})
    assert runs.status_code == 400 and runs.json()["errors"][0]["field"] == "target"
