"""The script steps of the pipeline examples (docs/pipelines/*.yml), run here the way their
CI system would: its expressions substituted, its environment set, each step's shell, its
condition, and Azure Pipelines' logging commands (task.setvariable). Steps that are
actions or tasks of the CI system (setup-python, azure/login, PublishTestResults, ...)
are not scripts: the test stands in for what they do."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GITHUB_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
AZDO_MACRO = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.]*)\)")
SET_VARIABLE = re.compile(r"##vso\[task\.setvariable variable=([^;\]]+)[^\]]*\](.*)")


@dataclass
class Outcome:
    name: str
    code: int | None  # None: skipped by its condition
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0


@dataclass
class Pipeline:
    """One run of an example: ``context`` holds what CI would substitute (GitHub's
    ``vars.X`` and ``github.x``; Azure Pipelines' variables), ``env`` what the machine has."""

    doc: dict[str, Any]
    context: dict[str, str]
    env: dict[str, str]
    workdir: Path
    outcomes: list[Outcome] = field(default_factory=list)
    after_step: Callable[[Outcome], None] = lambda outcome: None  # e.g. start another

    def _bash(self, script: str, env: Mapping[str, str], flags: list[str]) -> Outcome:
        path = self.workdir / f"step-{len(self.outcomes)}.sh"
        path.write_text(script)
        start = time.monotonic()
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", *flags, str(path)],
            cwd=self.workdir,
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=300,
        )
        took = time.monotonic() - start
        return Outcome("", done.returncode, done.stdout, done.stderr, took)


class GitHubWorkflow(Pipeline):
    def expr(self, text: str) -> str:
        def sub(m: re.Match[str]) -> str:
            return self.context[m.group(1)]  # KeyError: the test does not know it

        return GITHUB_EXPR.sub(sub, text)

    def run(self) -> list[Outcome]:
        (job,) = self.doc["jobs"].values()
        env = {**self.env, **{k: self.expr(str(v)) for k, v in job.get("env", {}).items()}}
        env |= {"GITHUB_ACTIONS": "true", "CI": "true"}
        env["GITHUB_STEP_SUMMARY"] = str(self.workdir / "step-summary.md")
        failed = False
        for step in job["steps"]:
            if "run" not in step:
                continue  # an action: the test stands in for it
            condition = step.get("if", "success()")
            if ("always()" not in condition and failed) or "failure()" in condition:
                self.outcomes.append(Outcome(step.get("name", ""), None))
                continue
            # GitHub's shells: `bash` is -eo pipefail; the default on Linux is bash -e.
            flags = ["-eo", "pipefail"] if step.get("shell") == "bash" else ["-e"]
            step_env = {**env, **{k: self.expr(str(v)) for k, v in step.get("env", {}).items()}}
            out = self._bash(self.expr(step["run"]), step_env, flags)
            out.name = step.get("name", step["run"][:40])
            self.outcomes.append(out)
            self.after_step(out)
            failed = failed or out.code != 0
        return self.outcomes


class AzurePipeline(Pipeline):
    def macro(self, text: str) -> str:
        def sub(m: re.Match[str]) -> str:
            name = m.group(1)
            value = self.context.get(name)
            return m.group(0) if value is None else self.macro(value)  # undefined: left as is

        return AZDO_MACRO.sub(sub, text)

    def condition(self, text: str, failed: bool) -> bool:
        """The few expressions the example uses: and, ne, variables['X'], succeeded(),
        succeededOrFailed(), always()."""
        python = (
            text.replace("and(", "all_(")
            .replace("ne(", "ne_(")
            .replace("succeededOrFailed()", "True")
            .replace("succeeded()", "(not failed)")
            .replace("always()", "True")
        )
        python = re.sub(r"variables\['([^']+)'\]", r"variables.get('\1', '')", python)
        scope = {
            "all_": lambda *a: all(a),
            "ne_": lambda a, b: a != b,
            "variables": self.context,
            "failed": failed,
        }
        return bool(eval(python, {"__builtins__": {}}, scope))  # noqa: S307 (the example's own text)

    def run(self) -> list[Outcome]:
        for name, value in self.doc.get("variables", {}).items():
            self.context.setdefault(name, str(value))
        failed = False
        for step in self.doc["steps"]:
            script = step.get("script") or (step.get("inputs") or {}).get("inlineScript")
            if script is None:
                continue  # a task: the test stands in for it
            name = step.get("displayName", "")
            if not self.condition(step.get("condition", "succeeded()"), failed):
                self.outcomes.append(Outcome(name, None))
                continue
            # Every variable is also in the environment (NAME.X -> NAME_X, upper case).
            env = {**self.env, "TF_BUILD": "True"}
            env |= {k.replace(".", "_").upper(): self.macro(v) for k, v in self.context.items()}
            env |= {k: self.macro(str(v)) for k, v in (step.get("env") or {}).items()}
            out = self._bash(self.macro(script), env, ["-e"] if "script" in step else [])
            out.name = name
            self.outcomes.append(out)
            self.after_step(out)
            for line in out.stdout.splitlines():
                if m := SET_VARIABLE.search(line):
                    self.context[m.group(1)] = m.group(2).strip()
            failed = failed or out.code != 0
        return self.outcomes


def clean_env(path_first: Path) -> dict[str, str]:
    """A CI machine's environment: this one's, without anything pointing at the source tree
    or its virtualenv, the fresh environment's bin first on PATH."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    keep = {k: v for k, v in keep.items() if not k.startswith(("BENCH", "PYTEST", "CI"))}
    path = [p for p in keep.get("PATH", "").split(os.pathsep) if ".venv" not in p]
    keep["PATH"] = os.pathsep.join([str(path_first), *path])
    return keep
