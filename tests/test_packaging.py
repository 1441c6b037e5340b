"""What the Function App is built from in Azure."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_requirements_txt_pins_exactly_the_projects_dependencies() -> None:
    # Flex Consumption installs requirements.txt; pyproject.toml is what tests run with.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    required = [x.strip() for x in lines if x.strip() and not x.startswith("#")]
    assert sorted(required) == sorted(project)
    assert all("==" in r for r in required), "every package pinned"


def test_deployment_package_leaves_out_what_the_app_does_not_run() -> None:
    ignored = (ROOT / ".funcignore").read_text().split()
    assert {".venv/", "node_modules/", "tests/", "bicep/"} <= set(ignored)
    for needed in ("function_app.py", "host.json", "functions", "core", "adapters", "schemas"):
        assert (ROOT / needed).exists() and f"{needed}/" not in ignored
