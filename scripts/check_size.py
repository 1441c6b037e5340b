"""The size limits (`make lint`): no Python module over 400 lines anywhere in the tree, and no
function over cyclomatic complexity 15 (radon's figure) in the product, scripts and benches.

Tests are held to the line limit only: radon counts each ``assert`` as a branch, so a test
that checks twenty figures would read as complex as a parser with twenty branches.

Usage: ``python scripts/check_size.py [--root DIR] [--allow FILE]``. Prints each offender
with its figure and exits 1 if any is not in the allowlist. The allowlist names offenders
still being worked on, one a line: ``path`` for a module's length, ``path::Qualified.name``
for a function's complexity; ``#`` starts a comment. An entry that no longer matches an
offender is reported so it can be removed, without failing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from radon.visitors import Class, ComplexityVisitor, Function

MAX_LINES = 400
MAX_COMPLEXITY = 15
# Held to the complexity limit too; everything else (tests) to the line limit only.
PRODUCT = (
    "core",
    "adapters",
    "functions",
    "agent",
    "benchctl",
    "reports",
    "tables",
    "apiclient",
    "function_app.py",
    "scripts",
    "bench",
)
# Not ours: virtualenvs, installed packages, build output, caches and the local stack's data.
SKIP_DIRS = {"node_modules", "build", "dist", "site", "__pycache__"}


@dataclass(frozen=True)
class Offender:
    key: str  # what an allowlist line names: path, or path::Qualified.name
    text: str


def python_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts[:-1]
        if any(p.startswith(".") or p in SKIP_DIRS or p.endswith(".egg-info") for p in parts):
            continue
        yield path


def functions_in(blocks: Iterable[Function | Class], prefix: str = "") -> Iterator[Function]:
    """Every function, method and closure, named ``Outer.inner`` (radon nests them)."""
    for block in blocks:
        name = f"{prefix}{block.name}"
        if isinstance(block, Class):
            yield from functions_in([*block.methods, *block.inner_classes], f"{name}.")
        else:
            yield Function(name, *block[1:])
            yield from functions_in(block.closures, f"{name}.")


def is_product(relative: Path) -> bool:
    return relative.parts[0] in PRODUCT


def offenders(root: Path) -> Iterator[Offender]:
    for path in python_files(root):
        relative = path.relative_to(root)
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines > MAX_LINES:
            yield Offender(relative.as_posix(), f"{relative}: {lines} lines (limit {MAX_LINES})")
        if not is_product(relative):
            continue
        module = ComplexityVisitor.from_code(source)
        for function in functions_in([*module.functions, *module.classes]):
            if function.complexity > MAX_COMPLEXITY:
                yield Offender(
                    f"{relative.as_posix()}::{function.name}",
                    f"{relative}:{function.lineno} {function.name}: complexity "
                    f"{function.complexity} (limit {MAX_COMPLEXITY})",
                )


def read_allowlist(path: Path | None) -> set[str]:
    if path is None:
        return set()
    entries = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {entry for entry in entries if entry}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--allow", type=Path, help="allowlist file (see the module's doc)")
    args = parser.parse_args(argv)
    allowed = read_allowlist(args.allow)
    found = list(offenders(args.root))
    failing = [o for o in found if o.key not in allowed]
    for offender in failing:
        print(offender.text)
    allowed_found = [o for o in found if o.key in allowed]
    if allowed_found:
        print(f"{len(allowed_found)} offender(s) allowed by {args.allow}")
    for stale in sorted(allowed - {o.key for o in found}):
        print(f"{args.allow}: {stale} is within the limits now; remove its entry")
    if failing:
        print(f"{len(failing)} over the limits ({MAX_LINES} lines, complexity {MAX_COMPLEXITY})")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
