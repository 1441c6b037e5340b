"""scripts/check_size.py, the size limits `make lint` checks: run as make runs it, on a tiny
tree with a module one line over the limit, a function one branch over it, and the same in a
test (held to the line limit only)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "check_size.py"


def branches(name: str, count: int) -> str:
    """A function of radon complexity ``count + 1``: one ``if`` a branch."""
    body = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(count))
    return f"def {name}(x: int) -> int:\n{body}    return -1\n"


def check(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def tree(root: Path) -> None:
    (root / "core").mkdir()
    (root / "tests").mkdir()
    (root / "core" / "long.py").write_text("x = 1\n" * 401)
    fits = branches("simple", 14)  # 400 lines, complexity 15: at both limits
    (root / "core" / "fits.py").write_text("x = 1\n" * (400 - fits.count("\n")) + fits)
    (root / "core" / "branchy.py").write_text(
        branches("at_limit", 14)
        + "\n\nclass Parser:\n"
        + "".join("    " + line + "\n" for line in branches("parse", 15).splitlines())
    )
    (root / "tests" / "test_many.py").write_text(branches("test_asserts", 40) + "y = 1\n" * 300)
    (root / "tests" / "test_long.py").write_text("y = 1\n" * 402)
    # Not ours: a virtualenv's and node's packages are never read.
    (root / ".venv" / "lib").mkdir(parents=True)
    (root / ".venv" / "lib" / "big.py").write_text("z = 1\n" * 1000)
    (root / "node_modules" / "pkg").mkdir(parents=True)
    (root / "node_modules" / "pkg" / "big.py").write_text("z = 1\n" * 1000)


def test_each_offender_is_printed_with_its_figure_and_fails(tmp_path: Path) -> None:
    tree(tmp_path)
    out = check(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines == [
        "core/branchy.py:34 Parser.parse: complexity 16 (limit 15)",
        "core/long.py: 401 lines (limit 400)",
        "tests/test_long.py: 402 lines (limit 400)",
        "3 over the limits (400 lines, complexity 15)",
    ]


def test_the_allowlist_lets_named_offenders_pass_and_names_stale_entries(
    tmp_path: Path,
) -> None:
    tree(tmp_path)
    allow = tmp_path / "allow.txt"
    allow.write_text(
        "# being split elsewhere\ncore/long.py\ncore/branchy.py::Parser.parse  # its parser\n"
    )
    out = check(tmp_path, "--allow", str(allow))
    assert out.returncode == 1
    assert out.stdout.splitlines()[0] == "tests/test_long.py: 402 lines (limit 400)"
    assert "2 offender(s) allowed" in out.stdout

    allow.write_text("core/long.py\ncore/branchy.py::Parser.parse\ntests/test_long.py\n")
    assert check(tmp_path, "--allow", str(allow)).returncode == 0

    (tmp_path / "core" / "long.py").write_text("x = 1\n" * 400)
    out = check(tmp_path, "--allow", str(allow))
    assert out.returncode == 0
    assert f"{allow}: core/long.py is within the limits now; remove its entry" in out.stdout


def test_closures_count_alone_and_are_named_by_their_outer_function(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    inner = "".join("    " + line + "\n" for line in branches("inner", 16).splitlines())
    (tmp_path / "scripts" / "tool.py").write_text(
        f"def outer() -> int:\n{inner}    return inner(1)\n"
    )
    out = check(tmp_path)
    assert out.returncode == 1
    assert out.stdout.splitlines()[0] == "scripts/tool.py:2 outer.inner: complexity 17 (limit 15)"
