"""The wheels the wheel's extras pin (its dependencies, [cli] and [agent]), downloaded once
per set of pins and kept in .local/, so that each fresh environment of tests/test_wheel.py
installs the product from it as it would from the package index, in seconds; and the
product's own wheel, built from the checkout's files as docs/deploy.md says, kept in .local/
per content of those files (and build backend).

`make test` prepares both in the lane beside the fio lane (``python -m tests.wheelhouse``):
the download, about 20-40 s of network and resolving, and the build (13 s of the fio lane's
setup in a rehearsal) are then off the critical path. A lock each lets the fixtures wait for
work already under way instead of racing it."""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pins() -> list[str]:
    """What `benchsvc[cli,agent]` requires: the wheel's Requires-Dist for those extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return sorted(project["dependencies"] + extras["cli"] + extras["agent"])


def wheelhouse() -> Path:
    required = pins()
    key = hashlib.sha256("\n".join(required).encode()).hexdigest()[:16]
    house = ROOT / ".local" / f"wheelhouse-{key}"
    house.parent.mkdir(exist_ok=True)
    with (ROOT / ".local" / "wheelhouse.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not house.exists():
            part = house.with_suffix(".part")
            shutil.rmtree(part, ignore_errors=True)
            download = [sys.executable, "-m", "pip", "download", "-q", "-d", str(part)]
            subprocess.run([*download, *required], check=True, capture_output=True, timeout=600)
            part.rename(house)
    return house


def source_files() -> list[str]:
    """What a release builds from: the checkout's files (tracked or new, not ignored), less
    node_modules/ and tests/, so nothing left in build/ by an earlier build can slip in."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return sorted(
        name
        for name in filter(None, listed.split("\0"))
        if (ROOT / name).is_file() and not name.startswith(("node_modules/", "tests/"))
    )


def built_wheel() -> Path:
    """Built as docs/deploy.md says (pip wheel --no-deps) from a copy of ``source_files``;
    the build backend is this environment's setuptools instead of a downloaded one (same
    wheel, seconds sooner). Kept per content: a change to any file builds anew."""
    names = source_files()
    digest = hashlib.sha256(importlib.metadata.version("setuptools").encode())
    for name in names:
        digest.update(f"\0{name}\0".encode() + (ROOT / name).read_bytes())
    out = ROOT / ".local" / f"wheel-{digest.hexdigest()[:16]}"
    out.parent.mkdir(exist_ok=True)
    with (ROOT / ".local" / "wheel.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            for old in out.parent.glob("wheel-*"):  # one kept: the tree's current one
                shutil.rmtree(old, ignore_errors=True)
            part = out.with_suffix(".part")
            source = part / "source"
            for name in names:
                (source / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, source / name)
            build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps"]
            build += ["--no-build-isolation", "-w", str(part / "dist"), str(source)]
            subprocess.run(build, check=True, capture_output=True, timeout=300)
            (found,) = (part / "dist").glob("benchsvc-*.whl")
            found.rename(part / found.name)
            shutil.rmtree(part / "dist")
            shutil.rmtree(source)
            part.rename(out)
    (wheel,) = out.glob("benchsvc-*.whl")
    return wheel


if __name__ == "__main__":
    print(wheelhouse())
    print(built_wheel())
