"""The wheels the wheel's extras pin (its dependencies, [cli] and [agent]), downloaded once
per set of pins and kept in .local/, so that each fresh environment of tests/test_wheel.py
installs the product from it as it would from the package index, in seconds.

`make test` prepares it in the lane beside the fio lane (``python -m tests.wheelhouse``):
the download, about 20-40 s of network and resolving, is then off the critical path. A
lock lets the fixture wait for a download already under way instead of racing it."""

from __future__ import annotations

import fcntl
import hashlib
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


if __name__ == "__main__":
    print(wheelhouse())
