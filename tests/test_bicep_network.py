"""The deployment's private-network option and its logs (issue 27; bicep/, read as
tests/test_bicep.py reads it): vnetEnabled integrates the app and closes the public endpoints,
private endpoints and DNS zones cover storage, Cosmos DB, the agent vault and the API, not the
app vault (Flex Consumption rules it out); diagnostic settings send the logs to the workspace."""

from __future__ import annotations

import json

import pytest

from tests.bicep_tree import (
    DEPLOY_DOC,
    body,
    main,
    main_module_params,
    module,
    resources_of_type,
    the,
)


def test_vnet_enabled_integrates_the_app_and_closes_the_public_endpoints() -> None:
    assert main()["parameters"]["vnetEnabled"]["default"] is False
    assert main()["modules"]["network"]["config"]["condition"] == "vnetEnabled"
    assert main()["modules"]["privateEndpoints"]["config"]["condition"] == "vnetEnabled"
    vnet = the(module("network"), "Microsoft.Network/virtualNetworks")
    subnets = {s["name"]: s["properties"] for s in vnet["properties"]["subnets"]}
    assert subnets["app"]["delegations"][0]["properties"]["serviceName"] == (
        "Microsoft.App/environments"
    )
    assert "natGateway" in subnets["agents"]  # agents reach packages and Entra ID
    assert all("networkSecurityGroup" in s for s in subnets.values())
    app = body(module("functionapp")["resources"]["app"])["properties"]
    assert "virtualNetworkSubnetId" in json.dumps(app["virtualNetworkSubnetId"])
    for name in ("storage", "cosmos"):
        assert main_module_params(name)["vnetEnabled"] == "vnetEnabled"
    storage = the(module("storage"), "Microsoft.Storage/storageAccounts")["properties"]
    assert storage["publicNetworkAccess"]["operator"]["operands"]["true_value"] == "Disabled"
    cosmos = the(module("cosmos"), "Microsoft.DocumentDB/databaseAccounts")["properties"]
    assert cosmos["publicNetworkAccess"]["operator"]["operands"]["true_value"] == "Disabled"


def test_private_endpoints_and_dns_cover_storage_cosmos_the_agent_vault_and_the_api() -> None:
    tree = module("private-endpoints")
    endpoints = tree["variables"]["endpoints"]["value"]["function"]["parameters"]
    fixed = endpoints["arg_1"]
    groups = {e["name"]: (e["group"], e["target"]) for e in fixed}
    assert groups == {
        "blob": ("blob", "storageAccountId"),
        "queue": ("queue", "storageAccountId"),
        "cosmos": ("Sql", "cosmosAccountId"),
        "kv-agent": ("vault", "agentVaultId"),
        "api": ("sites", "functionAppId"),  # agents reach the API privately
    }
    zones = {e["name"]: e["zone"] for e in fixed}
    assert zones["cosmos"] == "privatelink.documents.azure.com"
    assert zones["kv-agent"] == "privatelink.vaultcore.azure.net"
    assert zones["api"] == "privatelink.azurewebsites.net"
    params = main_module_params("privateEndpoints")
    assert "agentVault" in json.dumps(params["agentVaultId"])
    assert "appVault" not in json.dumps(params)  # Flex: no Key Vault references behind it
    link = body(tree["resources"]["links"])["properties"]
    assert link == {"registrationEnabled": False, "virtualNetwork": {"id": "vnetId"}}
    # Agents use the template's subnet when vnetEnabled.
    assert "agentsSubnetId" in json.dumps(main()["variables"]["agentsSubnet"])


@pytest.mark.parametrize(
    ("name", "scopes"),
    [
        ("keyvault", {"vault"}),
        ("storage", {"blobService", "queueService"}),
        ("cosmos", {"account"}),
    ],
)
def test_diagnostic_settings_send_key_vault_storage_and_cosmos_logs_to_the_workspace(
    name: str, scopes: set[str]
) -> None:
    tree = module(name)
    found = resources_of_type(tree, "Microsoft.Insights/diagnosticSettings")
    assert {body(r)["scope"] for r in found.values()} == scopes
    for r in found.values():
        props = body(r)["properties"]
        assert props["workspaceId"] == "workspaceId"
        categories = {log["category"] for log in props.get("logs", [])}
        assert categories and all(log["enabled"] for log in props["logs"])
        if body(r)["scope"] == "queueService":
            # Idle agents poll 4 times a second each: reads and queue writes are not logged.
            assert categories == {"StorageDelete"}
        if name == "keyvault":
            assert categories == {"AuditEvent"}
    for use in ("storage", "cosmos", "appVault", "agentVault"):
        assert "workspaceId" in json.dumps(main_module_params(use)["workspaceId"])


def test_the_app_vault_has_no_private_endpoint_as_flex_rules_out() -> None:
    """Documented limit: Key Vault references are not resolved behind network restrictions
    on Flex Consumption; the app vault stays public (RBAC guards it)."""
    assert main_module_params("appVault")["publicNetworkAccess"] == "Enabled"
    text = DEPLOY_DOC.read_text()
    assert "Key Vault references" in text and "vnetEnabled" in text
