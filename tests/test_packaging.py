"""What the Function App is built from in Azure, and what each machine installs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
API_ONLY = ("fastapi", "uvicorn", "plotly", "azure-cosmos", "azure-mgmt-")
# What exports traces and metrics (adapters/telemetry.py): the API's and the agents', never
# the CLI's.
TELEMETRY = ("opentelemetry", "azure-monitor-opentelemetry")
EXPORTERS = {
    "azure-monitor-opentelemetry",
    "opentelemetry-api",
    "opentelemetry-sdk",
    "opentelemetry-exporter-otlp-proto-http",
}


def _name(requirement: str) -> str:
    return re.split(r"[=<>\[ ;]", requirement, maxsplit=1)[0].lower()


def test_requirements_txt_pins_exactly_the_apps_dependencies() -> None:
    # Flex Consumption installs requirements.txt: benchsvc's own dependencies and [api]'s.
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    required = [x.strip() for x in lines if x.strip() and not x.startswith("#")]
    extras = PROJECT["optional-dependencies"]
    assert sorted(required) == sorted(set(PROJECT["dependencies"] + extras["api"]))
    assert all("==" in r for r in required), "every package pinned"
    pins: dict[str, str] = {}
    for extra in ("cli", "agent", "api"):
        for r in PROJECT["dependencies"] + extras[extra]:
            assert "==" in r, r
            assert pins.setdefault(_name(r), r) == r, f"{r} pinned differently in [{extra}]"


def test_every_dev_tool_is_pinned_exactly() -> None:
    # `make test` on a fresh machine installs [dev]: an unpinned tool (a type stub, a
    # pytest plugin) changes what lint and the tests do from one day to the next.
    dev = PROJECT["optional-dependencies"]["dev"]
    loose = [r for r in dev if not r.startswith("benchsvc[") and "==" not in r]
    assert not loose, f"unpinned in [dev]: {loose}"


def test_the_cli_and_the_agent_pull_none_of_the_apis_packages() -> None:
    extras = PROJECT["optional-dependencies"]
    for extra in ("cli", "agent"):
        names = [_name(r) for r in PROJECT["dependencies"] + extras[extra]]
        assert not [n for n in names if n.startswith(API_ONLY)], (extra, names)


def test_the_api_and_the_agents_export_telemetry_and_the_cli_pulls_none_of_it() -> None:
    extras = PROJECT["optional-dependencies"]
    cli = [_name(r) for r in PROJECT["dependencies"] + extras["cli"]]
    assert not [n for n in cli if n.startswith(TELEMETRY)], cli
    for extra in ("api", "agent"):
        assert {_name(r) for r in extras[extra]} >= EXPORTERS, extra
    assert "opentelemetry-instrumentation-fastapi" in {_name(r) for r in extras["api"]}


def test_pure_core_imports_no_azure_sdk_and_no_opentelemetry() -> None:
    """core/ is pure logic: every module of it imports, and none of them brings in an Azure
    SDK or OpenTelemetry (core.telemetry is a seam; adapters/telemetry.py fills it)."""
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "core").rglob("*.py")
    )
    code = f"import importlib, sys\nfor m in {modules!r}:\n    importlib.import_module(m)\n"
    code += "print(*sorted({n.split('.')[0] for n in sys.modules}))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = set(out.stdout.split())
    assert "core" in loaded
    assert not loaded & {"azure", "opentelemetry", "fastapi", "uvicorn"}, loaded


def test_deployment_package_leaves_out_what_the_app_does_not_run() -> None:
    ignored = (ROOT / ".funcignore").read_text().split()
    assert {".venv/", "node_modules/", "tests/", "bicep/"} <= set(ignored)
    assert {"benchctl/", "agent/", "apiclient/"} <= set(ignored)  # the CLI and the agent
    for needed in ("function_app.py", "host.json", "functions", "core", "adapters", "tables"):
        assert (ROOT / needed).exists() and f"{needed}/" not in ignored


BLOCK = """
import importlib.abc, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("benchctl", "agent", "apiclient"):
            raise ModuleNotFoundError(f"{name} is not in the Function App's package")
sys.meta_path.insert(0, Absent())
"""


@pytest.mark.slow  # a fresh interpreter importing the app: over 3 s alone
def test_the_app_imports_without_the_cli_and_the_agent(tmp_path: Path) -> None:
    """The deployment package, the repository less .funcignore's entries: every module of
    it imports without the CLI, the agent or their transport (which the editable install
    would otherwise still find)."""
    lines = (ROOT / ".funcignore").read_text().splitlines()
    ignored = [e.strip().rstrip("/") for e in lines if e.strip() and not e.startswith("#")]
    package = tmp_path / "app"
    shutil.copytree(
        ROOT,
        package,
        ignore=lambda d, names: [
            n for n in names if any(Path(n).match(e) for e in ignored) or n in (".git",)
        ],
    )
    modules = sorted(
        ".".join(p.relative_to(package).with_suffix("").parts).removesuffix(".__init__")
        for top in ("functions", "core", "adapters", "reports", "tables")
        for p in (package / top).rglob("*.py")
    )
    assert not (package / "benchctl").exists() and not (package / "agent").exists()
    code = BLOCK + f"sys.path.insert(0, {str(package)!r})\n"
    code += "import importlib\nimport function_app\n"
    code += f"for m in {modules!r}:\n    importlib.import_module(m)\n"
    code += "from functions.api import create_app\ncreate_app()\n"
    code += "assert all(m.__file__.startswith(sys.path[0]) for m in map(importlib.import_module, "
    code += f"{modules!r}))\n"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
