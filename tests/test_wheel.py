"""The product as delivered: the wheel built as docs/deploy.md says, installed with its
extras into fresh virtual environments outside the source tree (the CLI's with the
pipeline examples' own install step, the agent's as the VMs' cloud-init does), and the
script steps of docs/pipelines/*.yml run against the local stack, measured by an agent
installed from the wheel."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from benchctl.localstack import Stack
from tests.ci_steps import AzurePipeline, GitHubWorkflow, Outcome, clean_env
from tests.test_packaging import TELEMETRY
from tests.test_windows_installer import python_commands
from tests.wheelhouse import built_wheel
from tests.wheelhouse import wheelhouse as prepare_wheelhouse

# No figure here is held to a known load: the second fio lane (tests/lanes.py).
pytestmark = pytest.mark.fio_beside

ROOT = Path(__file__).resolve().parents[1]
API_ONLY = ("fastapi", "uvicorn", "plotly", "azure-cosmos", "azure-mgmt-")
PROFILE = "smoke-randread-4k"  # the catalogue's shortest (10 s): a pipeline's smoke check


@pytest.fixture(scope="module")
def wheel() -> Path:
    """Built as docs/deploy.md says from the checkout's files (tests/wheelhouse.py; `make
    test` builds it beside the fio lane, and a lock makes this wait for that build)."""
    return built_wheel()


@pytest.fixture(scope="module")
def wheelhouse() -> Path:
    """The pinned wheels the environments install from (tests/wheelhouse.py); the product
    itself never comes from there but from the build (`wheel`)."""
    return prepare_wheelhouse()


def fresh_venv(where: Path, wheelhouse: Path) -> Path:
    """A virtualenv outside the source tree whose `pip` installs into it from the
    wheelhouse (pip --python: the environment itself starts empty, as setup-python's)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    pip = where / "bin" / "pip"
    pip.write_text(
        f"#!/bin/sh\nexport PIP_NO_INDEX=1 PIP_NO_COMPILE=1 PIP_FIND_LINKS={wheelhouse}\n"
        f"exec {sys.executable} -m pip --python {where / 'bin' / 'python'} "
        '--disable-pip-version-check "$@"\n'
    )
    pip.chmod(0o755)
    return where


def installed(venv: Path) -> list[str]:
    code = "import importlib.metadata as m; print(*sorted(d.metadata['Name'].lower() "
    code += "for d in m.distributions()))"
    out = subprocess.run([venv / "bin" / "python", "-c", code], capture_output=True, text=True)
    return out.stdout.split()


@pytest.fixture
def wheel_agents(
    stack: Stack, pool: str, wheel: Path, wheelhouse: Path, tmp_path: Path
) -> Iterator[tuple[Path, list[subprocess.Popen[bytes]]]]:
    """Two agents installed as cloud-init installs them (pip install "benchsvc[agent] @
    URL"), run by their console script outside the source tree, mounting vol1 and vol2."""
    venv = fresh_venv(tmp_path / "agent-venv", wheelhouse)
    env = clean_env(venv / "bin")
    pip = [str(venv / "bin" / "pip"), "install", "-q", f"benchsvc[agent] @ {wheel.as_uri()}"]
    subprocess.run(pip, check=True, env=env, cwd=tmp_path, capture_output=True, timeout=300)
    volumes = tmp_path / "volumes"
    for alias in ("vol1", "vol2"):
        (volumes / alias).mkdir(parents=True)
    procs = []
    for n in (1, 2):
        argv = [str(venv / "bin" / "benchagent"), "--api-url", stack.api_url]
        argv += ["--queue-uri", stack.queue_uri, "--pool", pool, "--agent-id", f"{pool}-wheel{n}"]
        argv += ["--local-emulators", "--visibility-timeout", "6", "--retry-delay", "1"]
        argv += ["--heartbeat", "2"]
        argv += [f"--mount={a}={volumes / a}" for a in ("vol1", "vol2")]
        with (tmp_path / f"agent{n}.log").open("wb") as log:
            procs.append(
                subprocess.Popen(
                    argv,
                    cwd=tmp_path,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
    yield venv, procs
    for proc in procs:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def steps_of(pipeline: Any) -> list[tuple[str, int | None]]:
    print(*(f"{o.name}: exit {o.code}, {o.seconds:.1f} s" for o in pipeline.outcomes), sep="\n")
    return [(o.name, o.code) for o in pipeline.outcomes]


@pytest.mark.fio  # the wheel's agent runs fio
def test_the_wheel_runs_the_pipeline_examples_against_the_local_stack(
    stack: Stack,
    api: httpx.Client,
    pool: str,
    wheel: Path,
    wheelhouse: Path,
    wheel_agents: tuple[Path, list[subprocess.Popen[bytes]]],
    tmp_path: Path,
) -> None:
    agent_venv, agents = wheel_agents
    # The local stack stands in for Azure: no Entra ID (azure/login is not run), its pool
    # and targets, the catalogue's short profile, one client per run.
    cli_venv = fresh_venv(tmp_path / "gh" / "venv", wheelhouse)
    gh_work = tmp_path / "gh" / "work"
    gh_work.mkdir()
    github = GitHubWorkflow(
        yaml.safe_load((ROOT / "docs" / "pipelines" / "github-actions.yml").read_text()),
        {
            "vars.BENCH_API_URL": stack.api_url,
            "vars.BENCH_API_CLIENT_ID": "local",
            "vars.BENCH_WHEEL_URL": wheel.as_uri(),
            "github.sha": "0123abc",
            "github.repository_owner": "contoso",
        },
        clean_env(cli_venv / "bin"),
        gh_work,
    )
    (job,) = github.doc["jobs"].values()
    job["env"] |= {"BENCH_PROFILE": PROFILE, "BENCH_TARGET": "vol1", "BENCH_POOL": pool}
    job["env"] |= {"BENCH_CLIENTS": "1", "BENCH_SMOKE_TARGET": "vol2"}
    del job["env"]["BENCH_API_SCOPE"]

    # Azure Pipelines on another machine (a fresh environment of its own), at the same time;
    # its comparison's baseline (a variable given when the pipeline is queued) is the GitHub
    # benchmark's run, so the emulation holds that step until the run exists.
    azdo_venv = fresh_venv(tmp_path / "azdo" / "venv", wheelhouse)
    work = tmp_path / "azdo" / "work"
    (work / "staging").mkdir(parents=True)
    (work / "results").mkdir()
    azdo = AzurePipeline(
        yaml.safe_load((ROOT / "docs" / "pipelines" / "azure-devops.yml").read_text()),
        {
            "BENCH_API_URL": stack.api_url,
            "BENCH_API_CLIENT_ID": "local",
            "BENCH_WHEEL_URL": wheel.as_uri(),
            "Build.SourceVersion": "0123abc",
            "Build.ArtifactStagingDirectory": str(work / "staging"),
            "Common.TestResultsDirectory": str(work / "results"),
            "BENCH_PROFILE": PROFILE,
            "BENCH_TARGET": "vol2",
            "BENCH_POOL": pool,
            "BENCH_CLIENTS": "1",
            "BENCH_API_SCOPE": "",  # the local stack: no Entra ID
        },
        clean_env(azdo_venv / "bin"),
        work,
    )
    baseline = threading.Event()

    def github_done(step: Outcome) -> None:
        if step.name == "Benchmark (exit 3 on a regression)":
            junit = ET.parse(gh_work / "bench-junit.xml").getroot()
            props = {p.get("name"): p.get("value") for p in junit.iter("property")}
            azdo.context["BASELINE_RUN"] = str(props.get("run_id") or "")
            baseline.set()

    def azdo_done(step: Outcome) -> None:
        if step.name == "Benchmark (exit 3 on a regression)":
            assert baseline.wait(timeout=300)

    github.after_step, azdo.after_step = github_done, azdo_done
    azdo_thread = threading.Thread(target=azdo.run)
    azdo_thread.start()
    try:
        github.run()
    finally:
        baseline.set()  # never leave the other pipeline waiting
        azdo_thread.join(timeout=300)
    assert steps_of(github) == [
        ("Install benchctl", 0),
        ("Benchmark (exit 3 on a regression)", 0),
        ("Smoke check of a second volume", 0),
    ], github.outcomes
    assert steps_of(azdo) == [
        ("Install benchctl", 0),
        ("Benchmark (exit 3 on a regression)", 0),
        ("Compare with the last release's run", 0),
    ], azdo.outcomes

    # What each machine got: its extra, none of the API's packages; the wheel's own code.
    for venv in (cli_venv, azdo_venv, agent_venv):
        found = installed(venv)
        assert "benchsvc" in found
        assert not [n for n in found if n.startswith(API_ONLY)], found
    assert "rich" in installed(cli_venv) and "azure-storage-queue" in installed(agent_venv)
    # The agents export traces (agent/tracing.py); the CLI does not, and pulls none of it.
    for venv in (cli_venv, azdo_venv):
        assert not [n for n in installed(venv) if n.startswith(TELEMETRY)], installed(venv)
    assert {"opentelemetry-sdk", "azure-monitor-opentelemetry"} <= set(installed(agent_venv))
    where = subprocess.run(
        [cli_venv / "bin" / "python", "-c", "import core, benchctl; print(core.__file__)"],
        capture_output=True,
        text=True,
        cwd=gh_work,
        env=clean_env(cli_venv / "bin"),
    ).stdout
    assert where.startswith(str(cli_venv)), where  # the wheel's, not the source tree's
    # The Windows pools install the same extra (agent/windows/install-agent.ps1): its
    # post-install import check passes with [agent] alone.
    (check,) = python_commands((ROOT / "agent" / "windows" / "install-agent.ps1").read_text())
    imported = subprocess.run(
        [agent_venv / "bin" / "python", "-c", f"{check}; import agent; print(agent.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(agent_venv / "bin"),
    )
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.startswith(str(agent_venv)), imported.stdout

    # GitHub: the summary, the JUnit file, the smoke check's JSON, the run as recorded.
    summary = (gh_work / "step-summary.md").read_text()
    assert f"Benchmark `{PROFILE}` on `vol1`: completed" in summary
    assert "gate: not enough history" in summary  # the series' first run
    suite = ET.parse(gh_work / "bench-junit.xml").getroot()
    props = {str(p.get("name")): str(p.get("value")) for p in suite.iter("property")}
    assert props["state"] == "completed" and props["gate_verdict"] == "not-enough-history"
    assert suite.get("tests") == "3" and suite.get("skipped") == "3"
    cases = {str(c.get("name")) for c in suite.iter("testcase")}
    assert cases == {"read.iops", "read.bw_bytes", "read.lat.p99"}  # total p99 is gated
    smoke = json.loads((gh_work / "smoke.json").read_text())
    assert smoke["state"] == "completed" and smoke["target"] == "vol2"
    benchmark = api.get(f"/api/runs/{props['run_id']}").json()
    assert benchmark["requested_by"]["door"] == "pipeline"
    assert benchmark["tags"] == {"commit": "0123abc", "pipeline": "github"}
    assert benchmark["items"][0]["agent_id"].startswith(f"{pool}-wheel")

    # Azure Pipelines: its run, its summary, the comparison, the file PublishTestResults reads.
    assert azdo.context["BENCH_RUN"].startswith("r-")
    assert ": completed" in (work / "staging" / "bench.md").read_text()
    compare = (work / "staging" / "compare.md").read_text()
    assert f"### Run `{props['run_id']}` vs `{azdo.context['BENCH_RUN']}`" in compare
    # (vol2 against vol1, so that the two pipelines' runs need not queue for one target)
    assert "The runs differ in workload, targets or clients" in compare
    junit = ET.parse(work / "results" / "bench-junit.xml").getroot()
    assert junit.get("failures") == "0" and int(junit.get("tests") or 0) == 3
    assert all(a.poll() is None for a in agents)  # the wheel's agents served every run

    # The local stack needs a source checkout: from the wheel, a clear word, no traceback.
    up = subprocess.run(
        [cli_venv / "bin" / "benchctl", "local", "up", "--target", f"x={work}"],
        capture_output=True,
        text=True,
        cwd=work,
        env={**clean_env(cli_venv / "bin"), "BENCH_LOCAL_DIR": str(work / "local")},
        timeout=60,
    )
    assert up.returncode == 1 and "source checkout" in up.stderr, up.stderr
    assert "Traceback" not in up.stderr
