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


FAMILY = "standardDSv5Family"
VCPUS_4 = {"name": "vCPUs", "value": "4"}
POOL = {
    "name": "anf",
    "vmSize": "Standard_D4s_v5",
    "instanceCount": 2,
    "mounts": [{"alias": "vol1", "kind": "nfs", "source": "10.1.2.3:/bench-vol"}],
}


def usage(value: str, label: str, current: int, limit: int) -> dict[str, Any]:
    """A row of `az vm list-usage`."""
    return {
        "name": {"value": value, "localizedValue": label},
        "currentValue": current,
        "limit": limit,
    }


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
            "BENCH_POOLS_JSON": json.dumps([POOL]),
        },
        "parameters": {"cosmosDatabaseName": "bench"},
        "account": {"id": SUBSCRIPTION, "user": {"name": "ada@contoso.com", "type": "user"}},
        "encryption_at_host": {
            "name": "Microsoft.Compute/EncryptionAtHost",
            "properties": {"state": "Registered"},
        },
        "api_app": registration,
        "api_sp": {"appId": CLIENT, "appRoleAssignmentRequired": True},
        "flex_locations": [{"name": "Sweden Central"}, {"name": "East US"}],
        "vm_usage": [usage("cores", "Total Regional vCPUs", 0, 100), usage(FAMILY, "DSv5", 0, 100)],
        "vm_skus": [{"name": "Standard_D4s_v5", "family": FAMILY, "capabilities": [VCPUS_4]}],
        "scale_sets": [],
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
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.splitlines() == [
        f"preflight: API app registration: manual: the existing registration {CLIENT}",
        "preflight: ready to deploy",
    ]


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
    # Not asked for, not checked; nor without any pool (no VM uses it).
    facts["env"]["BENCH_AGENT_ENCRYPTION_AT_HOST"] = "false"
    assert preflight(facts, tmp_path).returncode == 0
    facts["env"]["BENCH_AGENT_ENCRYPTION_AT_HOST"] = "true"
    facts["env"]["BENCH_POOLS_JSON"] = "[]"
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
    # With the template's VNet the agents use its subnet: none to give.
    facts["env"]["BENCH_VNET_ENABLED"] = "true"
    assert "BENCH_AGENT_SUBNET_ID" not in preflight(facts, tmp_path).stdout
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
        assert pre["run"] == f"{python} scripts/preflight.py preprovision"
        assert not pre.get("continueOnError")  # a failed check stops azd
        post = hooks["postprovision"][os_name]
        assert post["run"] == f"{python} scripts/preflight.py postprovision"


def test_the_parameters_file_maps_encryption_at_host_with_a_boolean_default() -> None:
    params = json.loads((ROOT / "bicep" / "main.parameters.json").read_text())["parameters"]
    value = params["agentEncryptionAtHost"]["value"]
    assert value == "${BENCH_AGENT_ENCRYPTION_AT_HOST=true}"


# ---- issue 27: the plan, the region, the quota, the registration's path -------------------


def empty_subscription() -> dict[str, Any]:
    """Only what azd itself sets: no pool, no app registration given."""
    facts = ready()
    facts["env"] = {k: facts["env"][k] for k in ("AZURE_ENV_NAME", "AZURE_LOCATION")}
    facts["env"] |= {"AZURE_RESOURCE_GROUP": RG, "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION}
    facts |= {"api_app": None, "api_sp": None, "deleted_vaults": []}
    facts["authorization_policy"] = {"defaultUserRolePermissions": {"allowedToCreateApps": True}}
    facts["directory_roles"] = []
    facts["app_management_policy"] = {"applicationRestrictions": {}}
    return facts


def test_an_empty_subscription_deploys_with_azds_own_values_on_the_template_path(
    tmp_path: Path,
) -> None:
    out = preflight(empty_subscription(), tmp_path)
    assert out.returncode == 0, out.stdout
    assert "API app registration: template: created by bicep/modules/entra-app.bicep" in out.stdout


def test_a_tenant_that_forbids_app_registrations_is_sent_to_the_manual_path(
    tmp_path: Path,
) -> None:
    facts = empty_subscription()
    facts["authorization_policy"]["defaultUserRolePermissions"]["allowedToCreateApps"] = False
    out = preflight(facts, tmp_path)
    assert out.returncode == 1
    assert "this tenant does not let you create app registrations" in out.stdout
    assert "azd env set BENCH_API_CLIENT_ID <its client id>" in out.stdout
    # An Application Developer may, whatever the user setting.
    facts["directory_roles"] = [{"displayName": "Application Developer"}]
    assert preflight(facts, tmp_path).returncode == 0
    # A tenant that takes only api://<appId> identifiers rules the template path out.
    facts["app_management_policy"] = {
        "applicationRestrictions": {
            "identifierUris": {"nonDefaultUriAddition": {"state": "enabled"}}
        }
    }
    out = preflight(facts, tmp_path)
    assert out.returncode == 1 and "only api://<appId> identifier URIs" in out.stdout


def test_the_example_pools_placeholders_are_refused(tmp_path: Path) -> None:
    facts = ready()
    samples = json.loads((ROOT / "bicep" / "examples" / "pools.json").read_text())
    facts["env"]["BENCH_POOLS_JSON"] = json.dumps(samples[:1])  # anf: 10.0.0.4:/vol1
    out = preflight(facts, tmp_path)
    assert out.returncode == 1
    assert "pool anf, mount vol1: '10.0.0.4:/vol1' is a placeholder" in out.stdout
    facts["env"]["BENCH_POOLS_JSON"] = "[{not json"
    out = preflight(facts, tmp_path)
    assert out.returncode == 1 and "BENCH_POOLS_JSON is not JSON" in out.stdout


def test_azure_files_nfs_must_be_4_1_and_the_template_share_needs_the_vnet(
    tmp_path: Path,
) -> None:
    facts = ready()
    source = "stnfsabc.file.core.windows.net:/stnfsabc/bench"
    pool = {
        **POOL,
        "mounts": [{"alias": "nfs1", "kind": "nfs", "source": source, "nfs_version": "3"}],
    }
    facts["env"]["BENCH_POOLS_JSON"] = json.dumps([pool])
    out = preflight(facts, tmp_path)
    assert "Azure Files NFS shares speak NFS 4.1 only, not 3" in out.stdout
    facts = ready()
    facts["env"]["BENCH_NFS_SHARE_GIB"] = "100"
    out = preflight(facts, tmp_path)
    assert out.returncode == 1 and "azd env set BENCH_VNET_ENABLED true" in out.stdout
    facts["env"]["BENCH_VNET_ENABLED"] = "true"
    assert preflight(facts, tmp_path).returncode == 0


def test_a_windows_pool_needs_its_password_and_nothing_else_does(tmp_path: Path) -> None:
    facts = ready()
    windows = {"name": "win", "vmSize": "Standard_D4s_v5", "instanceCount": 1, "mounts": []}
    facts["env"]["BENCH_WINDOWS_POOL_JSON"] = json.dumps(windows)
    out = preflight(facts, tmp_path)
    assert (
        out.returncode == 1 and "the Windows pool needs BENCH_WINDOWS_ADMIN_PASSWORD" in out.stdout
    )
    facts["env"]["BENCH_WINDOWS_ADMIN_PASSWORD"] = "correct-horse-battery"
    assert preflight(facts, tmp_path).returncode == 0


def test_a_region_without_flex_consumption_is_refused(tmp_path: Path) -> None:
    facts = ready()
    facts["env"]["AZURE_LOCATION"] = "westindia"  # not in the template's list
    out = preflight(facts, tmp_path)
    assert out.returncode == 1 and "westindia does not offer Flex Consumption" in out.stdout
    # The live list wins over the template's: a listed region Azure no longer offers.
    facts = ready()
    facts["flex_locations"] = [{"name": "East US"}]
    out = preflight(facts, tmp_path)
    assert "swedencentral does not offer Flex Consumption" in out.stdout
    assert "az functionapp list-flexconsumption-locations" in out.stdout


def test_pools_beyond_the_vcpu_quota_are_refused(tmp_path: Path) -> None:
    facts = ready()
    # 2 x D4s_v5 = 8 vCPUs of the DSv5 family; 6 free.
    facts["vm_usage"][1] = usage(FAMILY, "Standard DSv5 Family vCPUs", 94, 100)
    out = preflight(facts, tmp_path)
    assert out.returncode == 1
    assert "Standard DSv5 Family vCPUs: the pools need 8 vCPUs at most, 6 are free" in out.stdout
    # An elastic pool counts at its maxCount.
    facts = ready()
    facts["env"]["BENCH_POOLS_JSON"] = json.dumps([{**POOL, "maxCount": 30}])
    out = preflight(facts, tmp_path)
    assert "the pools need 120 vCPUs at most, 100 are free" in out.stdout


def test_an_smb_pool_needs_its_secret_in_the_agent_vault_first(tmp_path: Path) -> None:
    facts = ready()
    share = {"alias": "share1", "kind": "smb", "source": "//acct.file.core.windows.net/s1"}
    pool = {**POOL, "mounts": [share | {"smb_secret_name": "smb-s1"}]}
    facts["env"]["BENCH_POOLS_JSON"] = json.dumps([pool])
    out = preflight(facts, tmp_path)
    assert "which the first azd up creates" in out.stdout  # no vault yet
    facts["env"]["AGENT_KEY_VAULT_NAME"] = "kv-agt-abc"
    facts["agent_vault_secrets"] = ["other"]
    out = preflight(facts, tmp_path)
    assert "az keyvault secret set --vault-name kv-agt-abc --name smb-s1" in out.stdout
    facts["agent_vault_secrets"] = ["smb-s1"]
    assert preflight(facts, tmp_path).returncode == 0


def test_preprovision_records_the_elastic_pools_capacities(tmp_path: Path) -> None:
    """A redeploy keeps what the API scaled the elastic pools to (main.bicep reads
    BENCH_ELASTIC_CAPACITIES), instead of setting 0 under running agents."""
    facts = ready()
    pools = [{**POOL, "maxCount": 4}, {**POOL, "name": "fixed"}]
    facts["env"]["BENCH_POOLS_JSON"] = json.dumps(pools)
    facts["scale_sets"] = [
        {"name": "vmss-anf-abc", "tags": {"bench-pool": "anf"}, "sku": {"capacity": 3}},
        {"name": "vmss-fixed-abc", "tags": {"bench-pool": "fixed"}, "sku": {"capacity": 2}},
        {"name": "other", "tags": {}, "sku": {"capacity": 9}},
    ]
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "preprovision", "--facts", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout
    assert 'BENCH_ELASTIC_CAPACITIES={"vmss-anf-abc": 3}' in out.stdout
