"""The Linux agent pool's cloud-init (bicep/cloud-init, rendered by evaluating the template's
expressions: tests/bicep_tree.py): every placeholder replaced, the agent's package and
configuration, systemd mount units systemd accepts, SMB credentials from the agent vault at
every boot, written mode 0600; SSH keys only; the Windows bootstrap's installer."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import stat
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.config import AgentConfig
from tests.bicep_tree import (
    BICEP,
    MODULES,
    ROOT,
    SAMPLE_MOUNTS,
    SAMPLE_PARAMS,
    Node,
    evaluate_variables,
    module,
    render_cloud_init,
    the,
    walk,
)
from tests.loopback import Quiet, serve

TOKEN = re.compile(r"@@[A-Z0-9_]+@@")


SMB_CREDENTIALS_UNIT = "benchsvc-smb-credentials.service"


def replaced_tokens(node: Node) -> set[str]:
    return {
        n["function"]["parameters"]["old_string"]
        for n in walk(node)
        if isinstance(n, dict) and n.get("function", {}).get("type") == "replace"
    }


@cache
def rendered_cloud_init() -> str:
    return render_cloud_init(SAMPLE_MOUNTS)


def cloud_init() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(rendered_cloud_init())
    return data


def write_file(path: str) -> str:
    (entry,) = [f for f in cloud_init()["write_files"] if f["path"] == path]
    content: str = entry["content"]
    return content


def unit_file_name(mount_path: str) -> str:
    """The mount unit's name as systemd itself derives it from the path (systemd.mount(5))."""
    out = subprocess.run(
        ["systemd-escape", "--path", "--suffix=mount", mount_path],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def unit_settings(text: str) -> dict[str, list[str]]:
    """`Section.Key` -> values, in order (systemd unit files may repeat a key)."""
    found: dict[str, list[str]] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            found.setdefault(f"{section}.{key}", []).append(value)
    return found


def test_every_placeholder_is_replaced_and_only_placeholders() -> None:
    template = (BICEP / "cloud-init" / "linux-agent.yaml").read_text()
    tree = module("agentpool-linux")
    assert replaced_tokens(tree["variables"]["cloudInit"]) == set(TOKEN.findall(template))
    assert not TOKEN.search(rendered_cloud_init())


def test_cloud_init_is_yaml_with_the_packages() -> None:
    text = rendered_cloud_init()
    assert text.startswith("#cloud-config\n")
    packages = cloud_init()["packages"]
    assert {"fio", "nfs-common", "cifs-utils", "python3-venv"} <= set(packages)


def test_the_agent_is_pip_installed_from_the_package_url_into_opt_benchsvc() -> None:
    runcmd = cloud_init()["runcmd"]
    assert ["python3", "-m", "venv", "/opt/benchsvc"] in runcmd
    (pip,) = [c for c in runcmd if c[0] == "/opt/benchsvc/bin/pip"]
    # With the agent's extra, as a PEP 508 direct reference: no API packages on the VMs.
    assert (
        pip[1] == "install" and pip[-1] == f"benchsvc[agent] @ {SAMPLE_PARAMS['agentPackageUrl']}"
    )
    assert runcmd.index(pip) < runcmd.index(
        ["systemctl", "enable", "--now", "--no-block", "benchsvc-agent"]
    )


AGENT_MOUNT_KEYS = {"path", "fstype", "source"}  # agent/config.py: a mount as an object


def test_agent_json_has_exactly_the_agent_config_fields() -> None:
    config = json.loads(write_file("/etc/benchsvc/agent.json"))
    fields = {f.name for f in dataclasses.fields(AgentConfig)}
    assert set(config) <= fields
    assert set(config) == {
        "api_url",
        "queue_uri",
        "pool",
        "mounts",
        "api_scope",
        "managed_identity_client_id",
        "imds",
        "work_dir",
        "appinsights_connection_string",
    }
    assert config["imds"] is True
    assert config["api_scope"] == SAMPLE_PARAMS["apiScope"]
    assert config["managed_identity_client_id"] == SAMPLE_PARAMS["agentIdentityClientId"]
    assert config["pool"] == "anf"


def test_agent_json_names_each_mounts_filesystem_and_source_as_mountinfo_shows_them() -> None:
    mounts = json.loads(write_file("/etc/benchsvc/agent.json"))["mounts"]
    # NFSv3 shows as nfs, NFSv4.x as nfs4 and SMB as cifs in /proc/self/mountinfo; the
    # source as given (an SMB share as //server/share).
    assert mounts == {
        "vol1": {"path": "/mnt/bench/vol1", "fstype": "nfs", "source": "10.0.0.4:/vol1"},
        "share1": {
            "path": "/mnt/bench/share1",
            "fstype": "cifs",
            "source": "//benchfiles.file.core.windows.net/share1",
        },
        "anf-v41": {"path": "/mnt/bench/anf-v41", "fstype": "nfs4", "source": "10.0.0.5:/vol2"},
    }
    assert all(set(m) == AGENT_MOUNT_KEYS for m in mounts.values())


def test_an_unknown_nfs_version_fails_the_rendering() -> None:
    with pytest.raises(KeyError, match="v5"):
        render_cloud_init([{**SAMPLE_MOUNTS[0], "nfs_version": "5"}])


def test_volumes_are_mounted_by_explicit_systemd_mount_units_not_cloud_inits_mounts() -> None:
    ci = cloud_init()
    # cloud-init's mounts module dropped //server/share sources: it is not used at all.
    assert "mounts" not in ci
    files = {f["path"]: f for f in ci["write_files"]}
    units = {}
    for m in SAMPLE_MOUNTS:
        path = "/etc/systemd/system/" + unit_file_name(f"/mnt/bench/{m['alias']}")
        assert files[path]["permissions"] == "0644", path
        units[m["alias"]] = unit_settings(files[path]["content"])
    assert "/etc/systemd/system/mnt-bench-anf\\x2dv41.mount" in files  # "-" escaped

    nfs = units["vol1"]
    assert nfs["Mount.What"] == ["10.0.0.4:/vol1"]
    assert nfs["Mount.Where"] == ["/mnt/bench/vol1"]
    assert nfs["Mount.Type"] == ["nfs"]
    (options,) = nfs["Mount.Options"]
    assert options.split(",") == [
        "vers=3",
        "nconnect=8",
        "rsize=262144",
        "wsize=262144",
        "hard",
        "proto=tcp",
        "noatime",
        "_netdev",
    ]
    assert SMB_CREDENTIALS_UNIT not in " ".join(v for vs in nfs.values() for v in vs)
    assert units["anf-v41"]["Mount.Options"][0].startswith("vers=4.1,nconnect=8,")

    smb = units["share1"]
    assert smb["Mount.What"] == ["//benchfiles.file.core.windows.net/share1"]
    assert smb["Mount.Where"] == ["/mnt/bench/share1"]
    assert smb["Mount.Type"] == ["cifs"]
    smb_options = smb["Mount.Options"][0].split(",")
    assert "credentials=/etc/benchsvc/smb-share1.cred" in smb_options
    assert "vers=3.1.1" in smb_options
    assert not any(o.startswith(("password=", "username=")) for o in smb_options)
    # The credentials are fetched before the share is mounted, at every boot.
    assert smb["Unit.Requires"] == [SMB_CREDENTIALS_UNIT]
    assert SMB_CREDENTIALS_UNIT in smb["Unit.After"]
    for unit in units.values():
        # A volume that does not mount must not be skipped quietly.
        assert "nofail" not in unit["Mount.Options"][0].split(",")


def test_systemd_accepts_the_rendered_units(tmp_path: Path) -> None:
    """systemd-analyze verify: the mount units' names match their Where=, every setting is
    known, the credentials service's command exists."""
    names = []
    for f in cloud_init()["write_files"]:
        if f["path"].startswith("/etc/systemd/system/") and f["path"] != (
            "/etc/systemd/system/benchsvc-agent.service"  # its binary is pip-installed later
        ):
            name = f["path"].rsplit("/", 1)[1]
            (tmp_path / name).write_text(f["content"])
            names.append(name)
    assert len(names) == len(SAMPLE_MOUNTS) + 1
    out = subprocess.run(
        ["systemd-analyze", "verify", *(str(tmp_path / n) for n in names)],
        capture_output=True,
        text=True,
        env={**os.environ, "SYSTEMD_UNIT_PATH": f"{tmp_path}:"},
    )
    assert out.returncode == 0, out.stderr


def test_the_agent_requires_every_mount_and_starts_after_the_units_are_loaded() -> None:
    unit = unit_settings(write_file("/etc/systemd/system/benchsvc-agent.service"))
    assert unit["Service.ExecStart"] == [
        "/opt/benchsvc/bin/benchagent --config /etc/benchsvc/agent.json"
    ]
    assert unit["Unit.RequiresMountsFor"] == [
        "/mnt/bench/vol1 /mnt/bench/share1 /mnt/bench/anf-v41"
    ]
    runcmd = cloud_init()["runcmd"]
    enable = runcmd.index(["systemctl", "enable", "--now", "--no-block", "benchsvc-agent"])
    assert runcmd.index(["systemctl", "daemon-reload"]) < enable
    # Nothing mounts or fetches outside systemd: no `mount -a`, no one-off credentials fetch.
    assert not any("mount" in c or any("fetch-smb" in a for a in c) for c in runcmd)


def test_a_pool_without_mounts_renders_valid_cloud_init() -> None:
    data = yaml.safe_load(render_cloud_init([]))
    files = {f["path"]: f["content"] for f in data["write_files"]}
    assert json.loads(files["/etc/benchsvc/agent.json"])["mounts"] == {}
    assert not [p for p in files if p.endswith(".mount")]


def test_smb_credentials_come_from_the_agent_vault_at_every_boot() -> None:
    smb = json.loads(write_file("/etc/benchsvc/smb.json"))
    assert smb["vault_uri"] == SAMPLE_PARAMS["agentKeyVaultUri"]
    assert smb["client_id"] == SAMPLE_PARAMS["agentIdentityClientId"]
    wanted = {m["alias"]: (m["secret"], m["credentials"]) for m in smb["mounts"]}
    assert wanted["share1"] == ("smb-share1", "/etc/benchsvc/smb-share1.cred")
    assert [m["alias"] for m in smb["mounts"] if m["kind"] == "smb"] == ["share1"]
    service = unit_settings(write_file(f"/etc/systemd/system/{SMB_CREDENTIALS_UNIT}"))
    assert service["Service.Type"] == ["oneshot"]
    assert service["Service.ExecStart"] == [
        "/usr/bin/python3 /usr/local/lib/benchsvc/fetch-smb-credentials.py /etc/benchsvc/smb.json"
    ]
    modes = {f["path"]: f["permissions"] for f in cloud_init()["write_files"]}
    assert modes["/etc/benchsvc/smb.json"] == "0600"
    assert modes["/usr/local/lib/benchsvc/fetch-smb-credentials.py"] == "0700"
    assert modes["/etc/benchsvc/agent.json"] == "0644"


class _VaultStandIn(Quiet):
    """Answers as the instance metadata endpoint (a token) and Key Vault (a secret) do."""

    secrets: dict[str, str] = {}
    seen: list[tuple[str, str]] = []

    def do_GET(self) -> None:
        if self.path.startswith("/metadata/identity/oauth2/token"):
            self.seen.append(("imds", self.headers.get("Metadata", "")))
            body = {"access_token": "tok", "token_type": "Bearer"}
        else:
            name = self.path.split("/secrets/", 1)[1].split("?", 1)[0]
            self.seen.append(("vault", self.headers.get("Authorization", "")))
            if name not in self.secrets:
                self.send_response(404)
                self.end_headers()
                return
            body = {"value": self.secrets[name]}
        data = json.dumps(body).encode()
        self.send_body(200, data, "application/json")


def test_the_credentials_file_is_written_mode_0600_whatever_the_umask(tmp_path: Path) -> None:
    """Runs the fetch script cloud-init writes, against a local stand-in for the metadata
    endpoint and Key Vault, with the usual umask 022 and a stale world-readable file."""
    _VaultStandIn.secrets = {"smb-share1": "username=benchfiles\npassword=not-a-real-key\n"}
    _VaultStandIn.seen = []
    server, base = serve(_VaultStandIn)
    try:
        config = json.loads(write_file("/etc/benchsvc/smb.json"))
        cred = tmp_path / "smb-share1.cred"
        cred.write_text("stale\n")
        cred.chmod(0o644)
        config["vault_uri"] = base + "/"
        config["identity_endpoint"] = base + "/metadata/identity/oauth2/token"
        for m in config["mounts"]:
            m["credentials"] = str(tmp_path / f"smb-{m['alias']}.cred")
        (tmp_path / "smb.json").write_text(json.dumps(config))
        script = tmp_path / "fetch.py"
        script.write_text(write_file("/usr/local/lib/benchsvc/fetch-smb-credentials.py"))
        out = subprocess.run(
            ["sh", "-c", f"umask 022 && {sys.executable} {script} {tmp_path / 'smb.json'}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.shutdown()
    assert out.returncode == 0, out.stderr + out.stdout
    assert stat.S_IMODE(cred.stat().st_mode) == 0o600
    assert cred.read_text() == "username=benchfiles\npassword=not-a-real-key\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "fetch.py",
        "smb-share1.cred",
        "smb.json",
    ]  # only the SMB mount's file, no temporary left behind
    assert ("imds", "true") in _VaultStandIn.seen and ("vault", "Bearer tok") in _VaultStandIn.seen


def test_linux_agents_log_in_with_ssh_keys_only() -> None:
    vmss = the(module("agentpool-linux"), "Microsoft.Compute/virtualMachineScaleSets")
    linux = vmss["properties"]["virtualMachineProfile"]["osProfile"]["linuxConfiguration"]
    assert linux["disablePasswordAuthentication"] is True
    image = vmss["properties"]["virtualMachineProfile"]["storageProfile"]["imageReference"]
    assert (image["publisher"], image["offer"], image["sku"]) == ("Debian", "debian-12", "12-gen2")


def test_windows_bootstrap_embeds_the_repository_installer() -> None:
    tree = module("agentpool-windows")
    template = (BICEP / "windows" / "bootstrap-agent.ps1").read_text()
    assert replaced_tokens(tree["variables"]["bootstrap"]) == set(TOKEN.findall(template))
    params = {
        "apiUrl": "https://x",
        "queueUri": "https://q",
        "poolName": "win",
        "mounts": [{"alias": "scratch", "path": "F:\\bench"}],
        "apiScope": "api://x/.default",
        "agentIdentityClientId": "c",
    }
    script = evaluate_variables(tree, params, MODULES)["bootstrap"]
    embedded = re.search(r"FromBase64String\('([A-Za-z0-9+/=]+)'\)", script)
    assert embedded
    installer = ROOT / "agent" / "windows" / "install-agent.ps1"
    assert base64.b64decode(embedded.group(1)).decode() == installer.read_text()
    config = script.split("@'\n", 1)[1].split("\n'@", 1)[0]
    assert json.loads(config)["mounts"] == params["mounts"]
