"""What a process the tests (and a fleet) start many times imports: the agent starts once
per test that uses one, so numpy (about 0.2 s of a start, for a default it never uses) stays
out of it."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.slow  # a fresh interpreter importing the agent: 1-2 s quiet, over 3 s at load
def test_the_agent_starts_without_numpy() -> None:
    code = "import sys, agent.__main__; print(sorted(m for m in sys.modules if 'numpy' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
