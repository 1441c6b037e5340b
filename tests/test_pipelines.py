"""The ready-to-copy pipeline examples: valid YAML, and every benchctl call in them uses
only flags benchctl documents (its --help) and README lists."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchctl.cli import parser

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "docs" / "pipelines").glob("*.yml"))
SCRIPT_KEYS = {"run", "script", "inlineScript", "bash"}
PLACEHOLDER = "r-" + "0" * 32


def scripts(node: Any) -> list[str]:
    """Every shell script in a workflow or pipeline document."""
    if isinstance(node, dict):
        found = [v for k, v in node.items() if k in SCRIPT_KEYS and isinstance(v, str)]
        return found + [s for v in node.values() for s in scripts(v)]
    if isinstance(node, list):
        return [s for v in node for s in scripts(v)]
    return []


def benchctl_calls(script: str) -> list[list[str]]:
    calls = []
    for line in script.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line.startswith("benchctl "):
            continue
        # The CI system substitutes its expressions, and the shell its variables, before
        # benchctl sees the line: a value of the shape every argument accepts (a run id).
        line = re.sub(r"\$\{\{.*?\}\}|\$\([A-Za-z_.]+\)|\$[A-Za-z_]+", PLACEHOLDER, line)
        argv = shlex.split(line.split(" > ")[0].split(" | ")[0])[1:]
        calls.append(argv)
    return calls


def options_of(p: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """Option strings of the (sub)parser that handles argv, exactly as spelled."""
    opts = set(p._option_string_actions)
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for word in argv:
                if word in action.choices:
                    opts |= options_of(action.choices[word], argv[argv.index(word) + 1 :])
                    break
    return opts


def test_there_are_examples_for_both_ci_systems() -> None:
    assert {p.name for p in EXAMPLES} == {"azure-devops.yml", "github-actions.yml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_parses_and_calls_only_documented_flags(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict)
    calls = [c for s in scripts(doc) for c in benchctl_calls(s)]
    assert calls, "no benchctl call found"
    # The reference: the front page and the documentation site's pages.
    readme = "\n".join(p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    p = parser()
    for argv in calls:
        known = options_of(p, argv)
        flags = [a.split("=")[0] for a in argv if a.startswith("--")]
        # Exact spellings only: argparse would also accept abbreviations.
        assert set(flags) <= known, f"undocumented flags {set(flags) - known} in {argv}"
        for flag in flags:
            assert re.search(rf"{re.escape(flag)}\b", readme), f"the docs do not mention {flag}"
        p.parse_args(argv)  # exits (SystemExit) on anything benchctl would refuse
    runs = [c for c in calls if c[0] == "run"]
    assert any("--fail-on-regression" in c and "--wait" in c for c in runs)


def test_a_typo_would_be_caught() -> None:
    p = parser()
    assert "--fail-on-regresion" not in options_of(p, ["run"])
    with pytest.raises(SystemExit):
        p.parse_args(["run", "--target", "t", "--fail-on-regresion"])
