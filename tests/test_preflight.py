"""scripts/preflight.py, the check azd runs before provisioning (azure.yaml preprovision).

No Azure here: each test writes the facts the script would read with `az` (shaped as
`az account show`, `az feature show`, `az ad app show`, `az ad sp show` and
`az keyvault list-deleted` print them) and runs the script on them with --facts, as a user
would with facts recorded by --dump-facts.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "preflight.py"
ENTRA = ROOT / "bicep" / "entra"
CLIENT = "11111111-2222-3333-4444-555555555555"
SUBSCRIPTION = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
RG = "rg-bench-prod"


def vault(name: str, group: str, env_name: str, protected: bool) -> dict[str, Any]:
    return {
        "name": name,
        "type": "Microsoft.KeyVault/deletedVaults",
        "properties": {
            "vaultId": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{group}"
            f"/providers/Microsoft.KeyVault/vaults/{name}",
            "location": "swedencentral",
            "deletionDate": "2026-11-20T10:00:00+00:00",
            "scheduledPurgeDate": "2027-02-18T10:00:00+00:00",
            "purgeProtectionEnabled": protected,
            "tags": {"azd-env-name": env_name, "application": "benchsvc"},
        },
    }


def ready() -> dict[str, Any]:
    """A subscription and tenant set up as docs/deploy.md says: the app registration is
    exactly what the guide's two PATCH bodies make of it."""
    app = json.loads((ENTRA / "api-app.json").read_text())
    pre = json.loads((ENTRA / "api-preauthorize.json").read_text())
    registration = {
        "appId": CLIENT,
        "identifierUris": [f"api://{CLIENT}"],
        "api": {**app["api"], **pre["api"]},
        "appRoles": app["appRoles"],
    }
    return {
        "env": {
            "AZURE_ENV_NAME": "bench-prod",
            "AZURE_LOCATION": "swedencentral",
            "AZURE_RESOURCE_GROUP": RG,
            "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
            "BENCH_API_CLIENT_ID": CLIENT,
            "BENCH_AGENT_SUBNET_ID": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/net"
            "/providers/Microsoft.Network/virtualNetworks/vnet/subnets/agents",
            "BENCH_AGENT_PACKAGE_URL": "https://example.invalid/benchsvc-0.1.0-py3-none-any.whl",
            "BENCH_AGENT_SSH_PUBLIC_KEY": "ssh-ed25519 AAAAC3Nza ada@contoso",
        },
        "parameters": {"cosmosDatabaseName": "bench"},
        "account": {"id": SUBSCRIPTION, "user": {"name": "ada@contoso.com", "type": "user"}},
        "encryption_at_host": {
            "name": "Microsoft.Compute/EncryptionAtHost",
            "properties": {"state": "Registered"},
        },
        "api_app": registration,
        "api_sp": {"appId": CLIENT, "appRoleAssignmentRequired": True},
        # Another environment's vault in the same group, this one's in another group.
        "deleted_vaults": [
            vault("kv-app-otherenv123", RG, "bench-test", True),
            vault("kv-app-elsewhere12", "rg-other", "bench-prod", True),
        ],
    }


def preflight(facts: dict[str, Any], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    return subprocess.run(
        [sys.executable, str(SCRIPT), "check", "--facts", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_subscription_set_up_as_the_guide_says_passes(tmp_path: Path) -> None:
    out = preflight(ready(), tmp_path)
    assert (out.returncode, out.stdout) == (0, "preflight: ready to deploy\n"), out.stderr


def test_encryption_at_host_unregistered_fails_before_deploying_with_the_fix(
    tmp_path: Path,
) -> None:
    facts = ready()
    facts["encryption_at_host"]["properties"]["state"] = "NotRegistered"
    out = preflight(facts, tmp_path)
    assert out.returncode == 1
    assert "Microsoft.Compute/EncryptionAtHost is NotRegistered" in out.stdout
    assert "az feature register --namespace Microsoft.Compute --name EncryptionAtHost" in (
        out.stdout
    )
    # Not asked for, not checked.
    facts["parameters"]["agentEncryptionAtHost"] = False
    assert preflight(facts, tmp_path).returncode == 0


def test_the_old_app_registration_is_refused_naming_aadsts65001(tmp_path: Path) -> None:
    """The registration the guide used to describe: roles, v2 tokens, no scope, nothing
    pre-authorized, so `az login` users could not get a token."""
    facts = ready()
    facts["api_app"]["api"] = {"requestedAccessTokenVersion": 2}
    out = preflight(facts, tmp_path)
    assert out.returncode == 1
    assert "scope user_impersonation (b409a425-3b28-408c-93ea-e62f3a1d5d2b) is not exposed" in (
        out.stdout
    )
    assert "the Azure CLI (and azd) is not pre-authorized for user_impersonation" in out.stdout
    assert "Azure PowerShell is not pre-authorized" in out.stdout
    assert "AADSTS65001" in out.stdout
    assert "--body @bicep/entra/api-preauthorize.json" in out.stdout


@pytest.mark.parametrize("role", ["Bench.Runner", "Bench.Agent"])
def test_a_missing_app_role_is_reported(tmp_path: Path, role: str) -> None:
    facts = ready()
    facts["api_app"]["appRoles"] = [r for r in facts["api_app"]["appRoles"] if r["value"] != role]
    out = preflight(facts, tmp_path)
    assert out.returncode == 1 and f"app role {role} is missing or disabled" in out.stdout


def test_a_service_principal_open_to_the_whole_tenant_is_refused(tmp_path: Path) -> None:
    facts = ready()
    facts["api_sp"]["appRoleAssignmentRequired"] = False
    out = preflight(facts, tmp_path)
    assert out.returncode == 1
    assert "anyone in the tenant can get a token" in out.stdout
    assert f"az ad sp update --id {CLIENT} --set appRoleAssignmentRequired=true" in out.stdout
    facts["api_sp"] = None
    assert f"az ad sp create --id {CLIENT}" in preflight(facts, tmp_path).stdout


def test_a_soft_deleted_vault_of_this_environment_blocks_the_redeploy(tmp_path: Path) -> None:
    facts = ready()
    facts["deleted_vaults"].append(vault("kv-agt-abc123def4567", RG.upper(), "bench-prod", True))
    out = preflight(facts, tmp_path)
    assert out.returncode == 1
    assert "Key Vault kv-agt-abc123def4567 was deleted" in out.stdout
    assert "python3 scripts/preflight.py recover-vaults" in out.stdout
    assert "cannot be purged before 2027-02-18" in out.stdout
    assert "az keyvault purge" not in out.stdout
    # Without purge protection it may also be purged.
    facts["deleted_vaults"][-1]["properties"]["purgeProtectionEnabled"] = False
    out = preflight(facts, tmp_path)
    assert "az keyvault purge --name kv-agt-abc123def4567 --location swedencentral" in out.stdout


def test_missing_values_and_no_sign_in_are_named(tmp_path: Path) -> None:
    facts = ready()
    del facts["env"]["BENCH_AGENT_SUBNET_ID"]
    facts["env"]["BENCH_AGENT_PACKAGE_URL"] = ""
    out = preflight(facts, tmp_path)
    assert out.returncode == 1
    assert "azd env set BENCH_AGENT_SUBNET_ID" in out.stdout
    assert "azd env set BENCH_AGENT_PACKAGE_URL" in out.stdout
    facts = copy.deepcopy(ready())
    facts["account"] = None
    assert "az login" in preflight(facts, tmp_path).stdout
    facts = ready()
    facts["account"]["id"] = "another-subscription"
    out = preflight(facts, tmp_path)
    assert f"az account set --subscription {SUBSCRIPTION}" in out.stdout


def test_azd_runs_the_preflight_before_and_the_role_grant_after_provisioning() -> None:
    hooks = yaml.safe_load((ROOT / "azure.yaml").read_text())["hooks"]
    for os_name, python in (("posix", "python3"), ("windows", "python")):
        pre = hooks["preprovision"][os_name]
        assert pre["run"] == f"{python} scripts/preflight.py check"
        assert not pre.get("continueOnError")  # a failed check stops azd
        post = hooks["postprovision"][os_name]
        assert post["run"] == f"{python} scripts/preflight.py grant-agent-role"


def test_the_parameters_file_sets_no_non_boolean_encryption_at_host() -> None:
    params = json.loads((ROOT / "bicep" / "main.parameters.json").read_text())["parameters"]
    assert params.get("agentEncryptionAtHost", {"value": True})["value"] in (True, False)
