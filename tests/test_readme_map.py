"""README's Layout section is the newcomer's map: every module it names exists, and every
package of core/ and every module of the run's stages is named in it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = (
    "validate",
    "plan",
    "enqueue",
    "claim and barrier",
    "run fio or DiskSpd",
    "parse",
    "store",
    "aggregate",
    "judge",
    "notify",
)


def layout() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## Layout\n", 1)[1].split("\n## ", 1)[0]


def stage_rows() -> dict[str, list[str]]:
    rows = {}
    for line in layout().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0] in STAGES:
            rows[cells[0]] = re.findall(r"`([^`]+)`", cells[1])
    return rows


def test_every_stage_has_a_row_and_every_module_named_exists() -> None:
    rows = stage_rows()
    assert list(rows) == list(STAGES)
    for stage, names in rows.items():
        assert names, stage
        folder = ROOT
        for name in names:
            # A bare file name continues the folder of the path before it in the row.
            path = ROOT / name if "/" in name else folder / name
            assert path.exists(), f"{stage}: {name} is not in the tree"
            folder = path if path.is_dir() else path.parent


def test_every_core_package_and_top_level_folder_is_on_the_map() -> None:
    text = layout()
    packages = sorted(p.name for p in (ROOT / "core").iterdir() if (p / "__init__.py").exists())
    for package in packages:
        assert re.search(rf"^\s+{package}/\s", text, re.M), f"core/{package}/ is not on the map"
    for folder in ("functions", "core", "adapters", "agent", "benchctl", "schemas", "bicep"):
        assert f"{folder}/" in text, folder


def test_the_project_points_to_nothing_outside_itself() -> None:
    # What the project needs from outside lives in its own docs, with public sources cited.
    tracked = [ROOT / p for p in ("README.md", "core", "docs", "benchctl", "agent", "functions")]
    files = [p for t in tracked for p in ([t] if t.is_file() else t.rglob("*")) if p.is_file()]
    for path in files:
        if path.suffix in (".py", ".md"):
            assert "../shared" not in path.read_text(), path
