"""What a process the tests (and a fleet) start many times imports: the agent starts once
per test that uses one, and benchctl once per command (a pipeline's gate, the tests' some
hundreds), so numpy (about 0.2-0.5 s of a start, for a default or a detector they never
use) stays out of both."""

from __future__ import annotations

import subprocess
import sys

import pytest


# A fresh interpreter importing the agent or the CLI: 1-2 s quiet, over 3 s at load.
@pytest.mark.slow
@pytest.mark.parametrize("module", ["agent.__main__", "benchctl.cli"])
def test_the_agent_and_benchctl_start_without_numpy(module: str) -> None:
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if 'numpy' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
