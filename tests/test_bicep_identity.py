"""The deployment's identities (bicep/, read as tests/test_bicep.py reads it): storage, Cosmos DB,
Key Vault and Application Insights take Entra ID only, the Function App its user-assigned
identity and App Service authentication, the API's app registration its scope and roles."""

from __future__ import annotations

import json
from typing import Any

from adapters.config import Settings
from adapters.cosmos import CONTAINERS
from core.runs.guardrails import ROLE_ORDER, best_role
from tests.bicep_tree import (
    BICEP,
    app_settings,
    body,
    main_module_params,
    module,
    parse,
    resources_of_type,
    the,
)


def test_storage_takes_no_shared_keys() -> None:
    props = the(module("storage"), "Microsoft.Storage/storageAccounts")["properties"]
    assert props["allowSharedKeyAccess"] is False
    assert props["defaultToOAuthAuthentication"] is True
    assert props["allowBlobPublicAccess"] is False
    assert props["supportsHttpsTrafficOnly"] is True
    assert props["minimumTlsVersion"] == "TLS1_2"


def test_storage_has_a_work_and_a_poison_queue_per_pool() -> None:
    queues = resources_of_type(
        module("storage"), "Microsoft.Storage/storageAccounts/queueServices/queues"
    )
    assert sorted(body(q)["name"] for q in queues.values()) == [
        "bench-${pool}",
        "bench-${pool}-poison",
    ]


def test_cosmos_is_serverless_and_keyless() -> None:
    props = the(module("cosmos"), "Microsoft.DocumentDB/databaseAccounts")["properties"]
    assert props["disableLocalAuth"] is True
    assert props["disableKeyBasedMetadataWriteAccess"] is True
    assert props["minimalTlsVersion"] == "Tls12"
    assert props["capabilities"] == [{"name": "EnableServerless"}]


def test_cosmos_containers_match_the_code() -> None:
    tree = module("cosmos")
    found = {c["name"]: c["pk"] for c in tree["variables"]["containers"]["value"]}
    # Those with a time to live are declared apart (core/retention.py).
    ttl = {}
    for name in ("activities", "agents", "conversations", "live"):
        resource = body(tree["resources"][name])["properties"]["resource"]
        found[resource["id"]] = resource["partitionKey"]["paths"][0]
        ttl[name] = resource["defaultTtl"]
    assert found == CONTAINERS
    assert ttl == {
        "activities": "activityTtlSeconds",
        "agents": "agentTtlSeconds",
        # on (-1, as pycep reads it); only a finished delivery's document carries a ttl
        "conversations": {"operator": {"type": "minus", "operands": {"integer_value": 1}}},
        "live": "liveTtlSeconds",
    }
    # Only the live samples' partition key is indexed: a second's write costs its size.
    live = body(tree["resources"]["live"])["properties"]["resource"]
    assert live["indexingPolicy"]["excludedPaths"] == [{"path": "/*"}]
    assert tree["parameters"]["activityTtlSeconds"]["default"] == 86400


def test_key_vaults_use_rbac_soft_delete_and_purge_protection_by_parameter() -> None:
    props = the(module("keyvault"), "Microsoft.KeyVault/vaults")["properties"]
    assert props["enableRbacAuthorization"] is True
    assert props["enableSoftDelete"] is True
    assert "accessPolicies" not in props
    # true or null: Key Vault refuses false, and turning it on cannot be undone.
    assert props["enablePurgeProtection"] == {
        "operator": {
            "type": "conditional",
            "operands": {"condition": "purgeProtection", "true_value": True, "false_value": None},
        }
    }
    main = parse(BICEP / "main.bicep")["parameters"]
    assert main["keyVaultPurgeProtection"] == {
        "decorators": main["keyVaultPurgeProtection"]["decorators"],
        "type": "bool",
        "default": True,
    }
    for vault in ("appVault", "agentVault"):
        assert main_module_params(vault)["purgeProtection"] == "keyVaultPurgeProtection"


def test_the_app_vault_stays_reachable_for_key_vault_references_on_flex() -> None:
    """Flex Consumption does not resolve Key Vault references from a network-restricted
    vault, even with VNet integration: the app vault cannot be made private by a parameter."""
    assert main_module_params("appVault")["publicNetworkAccess"] == "Enabled"
    # The agent vault: private with vnetEnabled (its private endpoint), else the parameter.
    agent = main_module_params("agentVault")["publicNetworkAccess"]["operator"]["operands"]
    assert agent == {
        "condition": "vnetEnabled",
        "true_value": "Disabled",
        "false_value": "agentKeyVaultPublicNetworkAccess",
    }
    main = parse(BICEP / "main.bicep")["parameters"]
    assert "keyVaultPublicNetworkAccess" not in main
    assert main["agentKeyVaultPublicNetworkAccess"]["default"] == "Enabled"


def test_app_insights_takes_entra_id_only() -> None:
    tree = module("monitoring")
    assert the(tree, "Microsoft.Insights/components")["properties"]["DisableLocalAuth"] is True
    workspace = the(tree, "Microsoft.OperationalInsights/workspaces")["properties"]
    assert workspace["features"]["disableLocalAuth"] is True


def test_function_app_is_flex_consumption_with_its_user_assigned_identity() -> None:
    tree = module("functionapp")
    assert the(tree, "Microsoft.Web/serverfarms")["sku"] == {
        "tier": "FlexConsumption",
        "name": "FC1",
    }
    app = body(tree["resources"]["app"])
    assert app["identity"]["type"] == "UserAssigned"
    flex = app["properties"]["functionAppConfig"]
    assert flex["runtime"] == {"name": "python", "version": "3.11"}
    storage = flex["deployment"]["storage"]
    assert storage["type"] == "blobContainer"
    assert storage["authentication"] == {
        "type": "UserAssignedIdentity",
        "userAssignedIdentityResourceId": "appIdentityId",
    }
    settings = app_settings()
    assert settings["AzureWebJobsStorage__accountName"] == "storageAccountName"
    assert settings["AzureWebJobsStorage__credential"] == "managedidentity"
    assert settings["AzureWebJobsStorage__clientId"] == "appIdentityClientId"
    assert settings["APPLICATIONINSIGHTS_CONNECTION_STRING"] == "appInsightsConnectionString"
    assert settings["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"] == (
        "Authorization=AAD;ClientId=${appIdentityClientId}"
    )
    assert not any(n.startswith("AzureWebJobsStorage") and n.count("__") == 0 for n in settings)


def test_app_service_authentication_guards_all_but_the_bot_and_health_routes() -> None:
    auth = body(module("functionapp")["resources"]["auth"])
    assert auth["name"] == "authsettingsV2"
    glob = auth["properties"]["globalValidation"]
    assert glob["requireAuthentication"] is True
    assert glob["unauthenticatedClientAction"] == "Return401"
    assert glob["excludedPaths"] == [
        "/api/bot/teams",
        "/api/bot/webhook",
        "/api/health",
        "/api/messages",  # the Teams bot checks Bot Framework's token itself
    ]
    aad = auth["properties"]["identityProviders"]["azureActiveDirectory"]
    assert aad["enabled"] is True
    assert aad["registration"]["clientId"] == "apiClientId"


AZURE_CLI = "04b07795-8ddb-461a-bbee-02f9e1bf7b46"  # azure-identity DEVELOPER_SIGN_ON_CLIENT_ID


AZURE_POWERSHELL = "1950a258-227b-4e31-a9cf-717495945fc2"  # Az.Accounts PowerShellClientId


def test_easy_auth_admits_only_the_agents_and_the_listed_client_applications() -> None:
    auth = body(module("functionapp")["resources"]["auth"])
    validation = auth["properties"]["identityProviders"]["azureActiveDirectory"]["validation"]
    assert validation["defaultAuthorizationPolicy"] == {
        "allowedApplications": "allowedClientApplications"
    }
    # main: the API's own client (the web UI's sign-in: its tokens' azp), every pool's agent
    # identity, then the people's tools and pipelines listed.
    allowed = main_module_params("functionApp")["allowedClientApplications"]
    own, agents, rest = allowed["function"]["parameters"].values()
    assert allowed["function"]["type"] == "concat"
    assert own == ["apiAppClientId"]
    assert agents["function"]["type"] == "map"
    mapped = agents["function"]["parameters"]
    assert mapped["arg_2"]["detail"]["expression"]["operator"]["operands"] == {
        "operand_1": "a",
        "operand_2": "clientId",
    }
    assert str(mapped["arg_1"]).count("'agents'") == 1  # identities.outputs.agents
    assert rest == "apiClientApplications"
    main = parse(BICEP / "main.bicep")["parameters"]
    assert main["apiClientApplications"]["default"] == [AZURE_CLI, AZURE_POWERSHELL]


def entra(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((BICEP / "entra" / name).read_text())
    return data


def test_the_app_registration_exposes_a_scope_preauthorized_for_the_allowed_clients() -> None:
    """What docs/deploy.md PATCHes onto the API's app registration: a delegated scope, so
    people get tokens through `az login` (no AADSTS65001), for exactly the client apps Easy
    Auth admits by default."""
    app, pre = entra("api-app.json"), entra("api-preauthorize.json")
    (scope,) = app["api"]["oauth2PermissionScopes"]
    assert scope["value"] == "user_impersonation" and scope["isEnabled"] is True
    assert app["api"]["requestedAccessTokenVersion"] == 2
    # The second PATCH repeats the first's api object, plus the pre-authorizations.
    assert {k: v for k, v in pre["api"].items() if k != "preAuthorizedApplications"} == app["api"]
    pre_authorized = pre["api"]["preAuthorizedApplications"]
    assert all(p["delegatedPermissionIds"] == [scope["id"]] for p in pre_authorized)
    default = parse(BICEP / "main.bicep")["parameters"]["apiClientApplications"]["default"]
    assert [p["appId"] for p in pre_authorized] == default


def test_the_app_roles_are_the_services_roles_and_agent_gives_none() -> None:
    roles = {r["value"]: r for r in entra("api-app.json")["appRoles"]}
    assert set(roles) == {f"Bench.{r.title()}" for r in ROLE_ORDER} | {"Bench.Agent"}
    for name in ROLE_ORDER:
        assert best_role([f"Bench.{name.title()}"], "") == name
        assert roles[f"Bench.{name.title()}"]["allowedMemberTypes"] == ["User", "Application"]
    # Bench.Agent only lets the agents' identity get a token (assignment is required); the
    # API knows agents by principal id and gives the role itself nothing.
    assert best_role(["Bench.Agent"], "") == ""
    assert roles["Bench.Agent"]["allowedMemberTypes"] == ["Application"]
    assert len({r["id"] for r in roles.values()}) == len(roles)


def test_a_caller_without_an_app_role_gets_no_role_by_default() -> None:
    main = parse(BICEP / "main.bicep")["parameters"]["defaultRole"]
    assert main["default"] == "none"
    (allowed,) = [d["argument"] for d in main["decorators"] if d["type"] == "allowed"]
    assert main_module_params("functionApp")["defaultRole"] == "defaultRole"
    assert app_settings()["BENCH_DEFAULT_ROLE"] == "defaultRole"
    # Every value the template allows is one the code accepts; "none" means no role.
    env = {
        "BENCH_QUEUE_URI": "https://q",
        "BENCH_BLOB_URI": "https://b",
        "BENCH_COSMOS_ENDPOINT": "https://c",
    }
    roles = {v: Settings.from_env({**env, "BENCH_DEFAULT_ROLE": v}).default_role for v in allowed}
    assert roles == {v: (None if v == "none" else v) for v in allowed}
