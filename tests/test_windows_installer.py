"""The Windows pool's installer as delivered: agent/windows/install-agent.ps1, the bootstrap
the scale set runs (bicep/windows/bootstrap-agent.ps1) and the module it deploys with.

PowerShell cannot be installed here, so the scripts are read as text: the Python command
the installer runs is run against the built wheel, the parameters the bootstrap passes are
checked against the installer's parameter block, and the agent configuration it writes
against agent/config.py."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from agent.config import AgentConfig

ROOT = Path(__file__).resolve().parent.parent
INSTALLER = ROOT / "agent" / "windows" / "install-agent.ps1"
BOOTSTRAP = ROOT / "bicep" / "windows" / "bootstrap-agent.ps1"
POOL_MODULE = ROOT / "bicep" / "modules" / "agentpool-windows.bicep"


def built_wheel(tmp: Path) -> Path:
    """The agent package as the pool installs it: `pip wheel` of this tree."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    (wheel,) = tmp.glob("benchsvc-*.whl")
    return wheel


def python_commands(script: str) -> list[str]:
    """The code of every `& $python -c '...'` line (single-quoted: PowerShell passes it
    verbatim)."""
    return re.findall(r"^\s*& \$python -c '([^']+)'", script, re.MULTILINE)


def imported_modules(code: str) -> list[str]:
    (line,) = [s.strip() for s in code.split(";") if s.strip().startswith("import ")]
    return [m.strip() for m in line.removeprefix("import ").split(",")]


def module_file(name: str) -> list[str]:
    path = name.replace(".", "/")
    return [f"{path}.py", f"{path}/__init__.py"]


@pytest.mark.slow
def test_the_installers_import_check_runs_against_the_built_wheel(tmp_path: Path) -> None:
    """The check the installer runs after pip (a failure there fails the scale set's
    extension): every module it names is in the wheel, and the command succeeds with the
    wheel's code, not this checkout's."""
    script = INSTALLER.read_text()
    (code,) = python_commands(script)
    modules = imported_modules(code)
    assert {"agent.__main__", "agent.winservice", "core.engines.diskspd_xml"} <= set(modules)
    wheel = built_wheel(tmp_path / "dist")
    names = set(zipfile.ZipFile(wheel).namelist())
    for m in modules:
        assert any(f in names for f in module_file(m)), f"{m} is not in {wheel.name}"
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = f"{code}; import agent; print(agent.__file__)"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(site))  # the wheel's copy was imported


def test_the_service_binary_is_python_running_a_module_of_the_wheel() -> None:
    script = INSTALLER.read_text()
    (binary,) = re.findall(r"^\$binary = '(.+)' -f \$python, \$configPath$", script, re.M)
    assert binary == '"{0}" -m agent.winservice --config "{1}"'
    assert "-BinaryPathName $binary" in script
    # No third-party service wrapper is downloaded or registered.
    for path in (INSTALLER, BOOTSTRAP, POOL_MODULE):
        text = path.read_text().lower()
        assert "nssm.exe" not in text and "nssm.cc" not in text and "nssmpath" not in text, path
    # Restarted when it stops on its own or with an error status, not only on a crash.
    assert re.search(r"sc\.exe failure \$ServiceName reset= \d+ actions= restart/", script)
    assert "& sc.exe failureflag $ServiceName 1" in script


def config_keys(script: str) -> set[str]:
    block = script.split("$config = [ordered]@{", 1)[1].split("\n}", 1)[0]
    keys = set(re.findall(r"^\s+([a-z_]+)\s+=", block, re.M))
    keys |= set(re.findall(r"\$config\['([a-z_]+)'\]", script))
    return keys


def test_the_configuration_names_diskspd_by_absolute_path() -> None:
    """The service starts right after the machine PATH changed and would not see it:
    DiskSpd's path is written into the agent's configuration, with the agent's own fields."""
    script = INSTALLER.read_text()
    keys = config_keys(script)
    assert keys <= {f.name for f in dataclasses.fields(AgentConfig)}
    assert {"diskspd_binary", "work_dir", "managed_identity_client_id", "imds"} <= keys
    assert re.search(r"^\s+diskspd_binary\s+= \$diskspd$", script, re.M)
    # $diskspd is the resolved -DiskSpdPath (or the machine PATH's copy), never a bare name.
    assert "$diskspd = (Resolve-Path -LiteralPath $DiskSpdPath).Path" in script
    bootstrap = BOOTSTRAP.read_text()
    assert "-DiskSpdPath (Join-Path $bin 'diskspd.exe')" in bootstrap
    # The bootstrap no longer relies on the PATH it could change.
    assert "SetEnvironmentVariable('Path'" not in bootstrap


def param_names(script: str) -> set[str]:
    block = script.split("param(", 1)[1].split("\n)", 1)[0]
    return set(re.findall(r"\] \$(\w+)", block))


def test_the_bootstrap_passes_only_parameters_the_installer_declares() -> None:
    call = BOOTSTRAP.read_text().split("& $installer", 1)[1]
    passed = set(re.findall(r" -([A-Z]\w+)", call))
    declared = param_names(INSTALLER.read_text())
    assert passed <= declared, passed - declared
    assert {"ApiUrl", "QueueUri", "Pool", "Mounts", "WheelPath", "DiskSpdPath"} <= passed


def test_the_scale_set_downloads_python_diskspd_and_the_wheel_only() -> None:
    text = POOL_MODULE.read_text()
    uris = text.split("fileUris: [", 1)[1].split("]", 1)[0].split()
    assert uris == ["pythonInstallerUrl", "diskSpdZipUrl", "agentPackageUrl"]
