"""Static checks of the Azure deployment (bicep/): parsing, no secrets, identity-only settings,
least-privilege role assignments, app settings against the code, and the agent's cloud-init.

Self-contained: reads the files under bicep/ with pycep (the parser Checkov uses) and never
touches the network or Azure. Where a check needs a value the template computes (the
cloud-init), it evaluates the Bicep expressions themselves with the small evaluator below.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from pycep import BicepParser

from adapters.config import SETTING_NAMES, Settings
from adapters.cosmos import CONTAINERS
from agent.config import AgentConfig
from core.runs.guardrails import ROLE_ORDER, best_role

ROOT = Path(__file__).resolve().parent.parent
BICEP = ROOT / "bicep"
MODULES = BICEP / "modules"
BICEP_FILES = sorted(BICEP.rglob("*.bicep"))

Node = Any  # pycep's JSON-like tree


@cache
def parse(path: Path) -> dict[str, Any]:
    tree: dict[str, Any] = dict(BicepParser().parse(file_path=path))
    return tree


def module(name: str) -> dict[str, Any]:
    return parse(MODULES / f"{name}.bicep")


def body(resource: dict[str, Any]) -> dict[str, Any]:
    """A resource's or module's declaration, looped, conditional or neither."""
    config: dict[str, Any] = resource["config"]
    looped_or_conditional = "loop_type" in config or set(config) == {"condition", "config"}
    return config["config"] if looped_or_conditional else config


def resources_of_type(tree: dict[str, Any], rtype: str) -> dict[str, dict[str, Any]]:
    return {n: r for n, r in tree["resources"].items() if r["type"] == rtype}


def walk(node: Node) -> Iterator[Node]:
    yield node
    if isinstance(node, dict):
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


# ---- a small evaluator for the Bicep expressions the tests need ---------------------------
# pycep keeps an identifier (a parameter, variable or loop variable) as a bare string, the
# same as a string literal; a string naming a known identifier is taken as a reference.
# String literals keep Bicep's escapes (\n, \\, \', \$, \u{...}) and their interpolations
# as text: both are resolved here; an interpolation may be a name with .property and [index]
# accessors (the templates keep function calls out of interpolations for that reason).

ACCESSOR = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*|\[[A-Za-z0-9_.]+\])*"
IN_STRING = re.compile(r"\\(u\{[0-9A-Fa-f]+\}|.)|\$\{(" + ACCESSOR + r")\}")
ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", "'": "'", "$": "$"}
FORMAT_ITEM = re.compile(r"\{(\d+)\}")


def _lookup(expr: str, env: dict[str, Any]) -> Any:
    steps = re.findall(r"\.?([A-Za-z_][A-Za-z0-9_]*)|\[([A-Za-z0-9_.]+)\]", expr)
    value = env[steps[0][0]]
    for name, index in steps[1:]:
        if name:
            value = value[name]
        else:
            value = value[int(index) if index.isdigit() else _lookup(index, env)]
    return value


def _to_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _string(literal: str, env: dict[str, Any]) -> str:
    def one(m: re.Match[str]) -> str:
        escape = m.group(1)
        if escape is None:
            return _to_text(_lookup(m.group(2), env))
        return chr(int(escape[2:-1], 16)) if escape.startswith("u{") else ESCAPES[escape]

    return IN_STRING.sub(one, literal)


def evaluate(node: Node, env: dict[str, Any], base: Path) -> Any:
    if node is None or isinstance(node, bool | int | float):
        return node
    if isinstance(node, str):
        return env[node] if node in env else _string(node, env)
    if isinstance(node, list):
        return [evaluate(v, env, base) for v in node]
    if "loop_type" in node:
        detail = node["loop_type"]["detail"]
        items = evaluate(detail["array_name"], env, base)
        out = []
        for i, item in enumerate(items):
            scope = {**env, detail["item_name"]: item}
            if "index_name" in detail:
                scope[detail["index_name"]] = i
            out.append(evaluate(node["config"], scope, base))
        return out
    if set(node) == {"operator"}:
        op, operands = node["operator"]["type"], node["operator"]["operands"]
        if op == "property_accessor":
            target = evaluate(operands["operand_1"], env, base)
            return target[operands["operand_2"]]
        if op == "index_accessor":
            target = evaluate(operands["operand_1"], env, base)
            return target[evaluate(operands["operand_2"], env, base)]
        if op == "conditional":
            taken = "true_value" if evaluate(operands["condition"], env, base) else "false_value"
            return evaluate(operands[taken], env, base)
        if op == "and":
            return all(evaluate(operands[k], env, base) for k in ("operand_1", "operand_2"))
        raise NotImplementedError(op)
    if set(node) == {"function"}:
        fn = node["function"]["type"]
        args = {k: v for k, v in node["function"]["parameters"].items() if v is not None}
        if fn == "load_text_content":
            return (base / args["file_path"]).read_text()
        values = [evaluate(v, env, base) for v in args.values()]
        if fn == "replace":
            return values[0].replace(values[1], values[2])
        if fn == "string":
            return _to_text(values[0])
        if fn == "json":
            return json.loads(values[0])
        if fn == "join":
            return values[1].join(values[0])
        if fn == "union":
            merged: dict[str, Any] = {}
            for v in values:
                merged.update(v)
            return merged
        if fn == "concat":
            if all(isinstance(v, str) for v in values):
                return "".join(values)
            return [x for v in values for x in v]
        if fn == "format":
            return FORMAT_ITEM.sub(lambda m: _to_text(values[1 + int(m.group(1))]), values[0])
        if fn == "base64":
            return base64.b64encode(values[0].encode()).decode()
        if fn == "contains":
            return values[1] in values[0]
        raise NotImplementedError(fn)
    return {k: evaluate(v, env, base) for k, v in node.items()}


def evaluate_variables(tree: dict[str, Any], params: dict[str, Any], base: Path) -> dict[str, Any]:
    """Every variable of a file, in declaration order (Bicep files here declare before use)."""
    env = dict(params)
    for name, var in tree["variables"].items():
        env[name] = evaluate(var["value"], env, base)
    return env


# ---- a. parsing -------------------------------------------------------------------------


def test_the_deployment_has_its_files() -> None:
    names = {p.relative_to(BICEP).as_posix() for p in BICEP_FILES}
    assert {
        "main.bicep",
        "modules/identities.bicep",
        "modules/monitoring.bicep",
        "modules/storage.bicep",
        "modules/cosmos.bicep",
        "modules/keyvault.bicep",
        "modules/roleassignments.bicep",
        "modules/functionapp.bicep",
        "modules/agentpool-linux.bicep",
        "modules/agentpool-windows.bicep",
        "modules/bot.bicep",
    } <= names
    main = parse(BICEP / "main.bicep")
    for mod in main["modules"].values():
        assert (BICEP / mod["detail"]["path"]).is_file(), mod["detail"]["path"]


@pytest.mark.parametrize("path", BICEP_FILES, ids=lambda p: p.relative_to(BICEP).as_posix())
def test_every_bicep_file_parses(path: Path) -> None:
    tree = parse(path)
    assert tree.get("resources") or tree.get("modules")


UNTAGGED_TYPES = {  # not taggable, or extension resources that inherit nothing to tag
    "Microsoft.Authorization/roleAssignments",
    "Microsoft.Authorization/roleDefinitions",
    "Microsoft.Insights/diagnosticSettings",
}


@pytest.mark.parametrize("path", BICEP_FILES, ids=lambda p: p.relative_to(BICEP).as_posix())
def test_every_top_level_resource_is_tagged(path: Path) -> None:
    for name, resource in parse(path).get("resources", {}).items():
        top_level = resource["type"].count("/") == 1
        if resource["existing"] or not top_level or resource["type"] in UNTAGGED_TYPES:
            continue
        if resource["type"].startswith("Microsoft.Graph/"):  # Entra objects: no ARM tags
            continue
        assert "tags" in body(resource), f"{path.name}: {name} has no tags"


# ---- b. no secrets ----------------------------------------------------------------------

FORBIDDEN = re.compile(
    r"listKeys\(|listConnectionStrings\(|listSecrets\(|listAccountSas\(|listServiceSas\(|"
    r"AccountKey=|SharedAccessSignature|SharedAccessKey|DefaultEndpointsProtocol|"
    r"primaryMasterKey|secondaryMasterKey|primaryKey|InstrumentationKey=",
    re.IGNORECASE,
)
SECRETISH = re.compile(r"password|secret", re.IGNORECASE)
SECRET_SETTINGS = re.compile(r"SECRET|KEY|TOKEN")
URLS_WITH_TOKENS = {"BENCH_TEAMS_WEBHOOK_URL"}  # an incoming-webhook URL carries its token


def deployment_text_files() -> list[Path]:
    return [p for p in sorted(BICEP.rglob("*")) if p.is_file()] + [ROOT / "azure.yaml"]


def test_no_key_or_connection_string_anywhere() -> None:
    for path in deployment_text_files():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            assert not FORBIDDEN.search(line), f"{path}:{n}: {line.strip()}"


@pytest.mark.parametrize("path", BICEP_FILES, ids=lambda p: p.relative_to(BICEP).as_posix())
def test_secure_and_secret_params_have_no_default(path: Path) -> None:
    for name, param in parse(path).get("parameters", {}).items():
        secure = any(d["type"] == "secure" for d in param["decorators"])
        if secure:
            # Empty at most: azd asks for a parameter without a default (azure-dev#2896),
            # and an empty password is refused where it is used (@minLength).
            assert param["default"] in (None, ""), (
                f"{path.name}: @secure() param {name} has a default"
            )
        if param["type"] == "string" and SECRETISH.search(name):
            assert secure, f"{path.name}: {name} looks secret but is not @secure()"


def test_sample_parameters_hold_no_secret_values() -> None:
    params = json.loads((BICEP / "main.parameters.json").read_text())["parameters"]
    for name, entry in params.items():
        if SECRETISH.search(name) and isinstance(entry["value"], str):
            assert re.fullmatch(r"\$\{[A-Z0-9_]+\}|", entry["value"]), name


def app_settings() -> dict[str, Node]:
    app = module("functionapp")["resources"]["app"]
    settings = body(app)["properties"]["siteConfig"]["appSettings"]
    return {s["name"]: s["value"] for s in settings}


def test_secret_settings_are_key_vault_references_or_empty() -> None:
    variables = module("functionapp")["variables"]
    for name, value in app_settings().items():
        if not (SECRET_SETTINGS.search(name) or name in URLS_WITH_TOKENS):
            continue
        if value == "":
            continue
        # kvRefs.<x>: a reference when the operator has set the secret, else empty.
        op = value["operator"]
        assert op["type"] == "property_accessor" and op["operands"]["operand_1"] == "kvRefs", name
        ref = variables["kvRefs"]["value"][op["operands"]["operand_2"]]["operator"]["operands"]
        assert ref["true_value"].startswith("@Microsoft.KeyVault(VaultName=${keyVaultName};"), name
        assert ref["false_value"] == "", name


def test_key_vault_references_resolve_with_the_app_identity() -> None:
    props = body(module("functionapp")["resources"]["app"])["properties"]
    assert props["keyVaultReferenceIdentity"] == "appIdentityId"
    names = re.findall(r"SecretName=([a-z-]+)\)", (MODULES / "functionapp.bicep").read_text())
    assert sorted(names) == [
        "bot-secret",
        "teams-bot-secret",
        "teams-webhook-url",
        "webhook-secret",
    ]


# ---- c. identity only -------------------------------------------------------------------


def the(tree: dict[str, Any], rtype: str) -> dict[str, Any]:
    (resource,) = resources_of_type(tree, rtype).values()
    return body(resource)


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


def main_module_params(name: str) -> dict[str, Node]:
    params: dict[str, Node] = body(parse(BICEP / "main.bicep")["modules"][name])["params"]
    return params


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


# ---- d. least-privilege role assignments ------------------------------------------------

BUILT_IN_ROLES = {
    "c6a89b2d-59bc-44d0-9896-0f6e12d7b80a": "Storage Queue Data Message Sender",
    "b7e6dc6d-f1e8-4753-8033-0f276bb0955b": "Storage Blob Data Owner",
    "4633458b-17de-408a-b874-0445c86b69e6": "Key Vault Secrets User",
    "3913510d-42f4-4e42-8a64-420c390055eb": "Monitoring Metrics Publisher",
    "00000000-0000-0000-0000-000000000002": "Cosmos DB Built-in Data Contributor",
}
CUSTOM_QUEUE_ROLE = "custom: queue agent"
CUSTOM_SCALER_ROLE = "custom: pool scaler"

# (principal, role, scope): the whole table; widening a scope or adding a role fails here.
EXPECTED_ASSIGNMENTS = {
    ("app", "Storage Queue Data Message Sender", "queue: bench-<pool>"),
    ("app", "Storage Queue Data Message Sender", "queue: bench-<pool>-poison"),
    ("app", "Storage Blob Data Owner", "storage account"),
    ("app", "Key Vault Secrets User", "key vault: app"),
    ("app", "Monitoring Metrics Publisher", "application insights"),
    ("app", "Cosmos DB Built-in Data Contributor", "cosmos database"),
    # Each pool's own identity: its own queue, and only the secrets its own mounts name.
    ("agent", CUSTOM_QUEUE_ROLE, "queue: bench-<pool>"),
    ("agent", "Key Vault Secrets User", "key vault secret: the pool's SMB credentials"),
    # Each pool's identity sends its agents' traces (issue 31).
    ("agent", "Monitoring Metrics Publisher", "application insights"),
    # Elastic pools (issue 18): the app sets the capacity of each one's scale set, only.
    ("app", CUSTOM_SCALER_ROLE, "scale set: elastic pool"),
}
PRINCIPALS = {
    "appPrincipalId": "app",
    "agentPrincipalIds[i]": "agent",
    "grant.principalId": "agent",
}


def _principal(node: Node) -> str:
    if isinstance(node, str):
        return PRINCIPALS[node]
    op = node["operator"]
    a, b = op["operands"]["operand_1"], op["operands"]["operand_2"]
    return PRINCIPALS[f"{a}[{b}]" if op["type"] == "index_accessor" else f"{a}.{b}"]


def _symbol(node: Node) -> str:
    """The resource symbol of a scope: `x` or `x[i]`."""
    if isinstance(node, str):
        return node
    op = node["operator"]
    assert op["type"] == "index_accessor", node
    name: str = op["operands"]["operand_1"]
    return name


def _scope_kind(tree: dict[str, Any], symbol: str) -> str:
    resource = tree["resources"][symbol]
    assert resource["existing"], f"{symbol}: scope must be a resource of its own"
    rtype: str = resource["type"]
    name: str = body(resource)["name"]
    kinds = {
        "Microsoft.Storage/storageAccounts": "storage account",
        "Microsoft.Insights/components": "application insights",
    }
    if rtype == "Microsoft.Storage/storageAccounts/queueServices/queues":
        return "queue: " + name.replace("${pool}", "<pool>")
    if rtype == "Microsoft.Compute/virtualMachineScaleSets":
        assert name == "name" and resource["config"]["loop_type"]["detail"] == {
            "item_name": "name",
            "array_name": "elasticScaleSets",
        }, resource
        return "scale set: elastic pool"
    if rtype == "Microsoft.KeyVault/vaults":
        return {"appKeyVaultName": "key vault: app", "agentKeyVaultName": "key vault: agent"}[name]
    if rtype == "Microsoft.KeyVault/vaults/secrets":
        # A secret of the agent vault, one per grant: the pool's own mounts' secrets.
        assert body(resource)["parent"] == "agentVault"
        assert resource["config"]["loop_type"]["detail"]["array_name"] == "agentSecretGrants"
        return "key vault secret: the pool's SMB credentials"
    return kinds[rtype]


def _role(tree: dict[str, Any], definition: Node) -> str:
    roles = tree["variables"]["roles"]["value"]
    fn = definition["function"]
    assert fn["type"] == "subscription_resource_id", definition
    assert fn["parameters"]["resource_type"] == "Microsoft.Authorization/roleDefinitions"
    name = fn["parameters"]["resource_name_1"]
    # The custom roles (roledefinitions.bicep), by the names main passes from its outputs.
    custom = {"queueAgentRoleName": CUSTOM_QUEUE_ROLE, "poolScalerRoleName": CUSTOM_SCALER_ROLE}
    if isinstance(name, str):
        return custom[name]
    ref = name["operator"]["operands"]
    assert ref["operand_1"] == "roles"
    return BUILT_IN_ROLES[roles[ref["operand_2"]]]


def found_assignments() -> set[tuple[str, str, str]]:
    tree = module("roleassignments")
    found = set()
    for name, resource in resources_of_type(
        tree, "Microsoft.Authorization/roleAssignments"
    ).items():
        decl = body(resource)
        assert decl["name"]["function"]["type"] == "guid", f"{name}: name must be guid(...)"
        assert "scope" in decl, f"{name}: no scope means the whole resource group"
        props = decl["properties"]
        found.add(
            (
                _principal(props["principalId"]),
                _role(tree, props["roleDefinitionId"]),
                _scope_kind(tree, _symbol(decl["scope"])),
            )
        )
    for name, resource in resources_of_type(
        tree, "Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments"
    ).items():
        decl = body(resource)
        assert decl["name"]["function"]["type"] == "guid", f"{name}: name must be guid(...)"
        props = decl["properties"]
        assert props["scope"] == "${cosmos.id}/dbs/${cosmosDatabaseName}", name
        role_id = props["roleDefinitionId"]
        assert role_id == "${cosmos.id}/sqlRoleDefinitions/${roles.cosmosDataContributor}"
        role = BUILT_IN_ROLES[tree["variables"]["roles"]["value"]["cosmosDataContributor"]]
        found.add((PRINCIPALS[props["principalId"]], role, "cosmos database"))
    return found


def test_role_assignments_are_exactly_the_expected_least_privilege_table() -> None:
    assert found_assignments() == EXPECTED_ASSIGNMENTS


def test_only_the_role_modules_define_and_assign_roles() -> None:
    for path in BICEP_FILES:
        types = {r["type"] for r in parse(path).get("resources", {}).values()}
        if path.name != "roleassignments.bicep":
            assert not any("roleAssignments" in t for t in types), path
        if path.name != "roledefinitions.bicep":
            assert not any("roleDefinitions" in t for t in types), path


def test_custom_roles_are_defined_first_and_assigned_after_cosmos_db() -> None:
    """A role definition replicates with a delay: an assignment in the same deployment can
    fail with RoleDefinitionDoesNotExist on the first azd up. The definitions are a module
    of their own that waits for nothing; the assignments take their names from its outputs
    (so wait for it) and the Cosmos DB account's (minutes later)."""
    main = parse(BICEP / "main.bicep")["modules"]
    definitions = body(main["roleDefinitions"])
    assert "dependsOn" not in definitions and "params" not in definitions
    roles = body(main["roles"])["params"]
    for name in ("queueAgentRoleName", "poolScalerRoleName"):
        assert roles[name]["operator"]["operands"]["operand_1"] == "roleDefinitions"
    assert roles["cosmosAccountName"]["operator"]["operands"]["operand_1"] == "cosmos"
    assert not resources_of_type(
        module("roleassignments"), "Microsoft.Authorization/roleDefinitions"
    )


def test_main_passes_each_identity_to_its_own_principal() -> None:
    params = body(parse(BICEP / "main.bicep")["modules"]["roles"])["params"]
    accessor = params["appPrincipalId"]["operator"]["operands"]
    assert accessor["operand_1"] == "identities"
    assert accessor["operand_2"]["operator"]["operands"] == {
        "operand_1": "outputs",
        "operand_2": "appPrincipalId",
    }
    # Every pool's identity, in the order of the pools whose queues it is scoped to.
    agents = params["agentPrincipalIds"]["function"]
    assert agents["type"] == "map"
    assert "'agents'" in str(agents["parameters"]["arg_1"])
    assert params["pools"] == "allPools"
    assert body(parse(BICEP / "main.bicep")["modules"]["identities"])["params"]["pools"] == (
        "allPools"
    )


def test_the_agents_custom_role_can_only_process_messages_in_this_resource_group() -> None:
    tree = module("roledefinitions")
    props = body(tree["resources"]["queueAgentRole"])["properties"]
    (permissions,) = props["permissions"]
    prefix = "Microsoft.Storage/storageAccounts/queueServices/queues/messages/"
    assert sorted(permissions["dataActions"]) == sorted(
        prefix + a for a in ("read", "write", "delete", "process/action")
    )
    assert permissions["actions"] == []
    (scope,) = props["assignableScopes"]
    accessor = scope["operator"]["operands"]
    assert accessor["operand_1"]["function"]["type"] == "resource_group"
    assert accessor["operand_2"] == "id"


def test_the_apps_scaler_role_can_only_read_and_write_scale_sets() -> None:
    tree = module("roledefinitions")
    props = body(tree["resources"]["poolScalerRole"])["properties"]
    (permissions,) = props["permissions"]
    assert sorted(permissions["actions"]) == [
        "Microsoft.Compute/virtualMachineScaleSets/read",
        "Microsoft.Compute/virtualMachineScaleSets/write",
    ]
    assert permissions["dataActions"] == [] and permissions["notActions"] == []
    (scope,) = props["assignableScopes"]
    assert scope["operator"]["operands"]["operand_1"]["function"]["type"] == "resource_group"


def test_elastic_pools_are_created_empty_before_the_app_may_scale_them() -> None:
    main = parse(BICEP / "main.bicep")["modules"]
    elastic = body(main["elasticAgentPools"])["params"]
    # 0 when new; on a redeploy the capacity the API set (elasticCapacitiesJson, which
    # scripts/preflight.py preprovision records): agents at work are not scaled away.
    count = elastic["instanceCount"]["operator"]
    assert count["type"] == "conditional" and count["operands"]["false_value"] == 0
    assert count["operands"]["true_value"]["operator"]["operands"] == {
        "operand_1": "elasticCapacities",
        "operand_2": "vmss-${pool.name}-${token}",
    }
    fixed = body(main["linuxPools"])["params"]
    assert fixed["instanceCount"] != 0  # fixed pools keep their count
    # The role assignment on a scale set needs the scale set: roles come after them.
    assert "elasticAgentPools" in str(body(main["roles"]).get("dependsOn"))


# ---- e. app settings against the code ---------------------------------------------------


def test_service_settings_are_exactly_those_the_code_reads() -> None:
    names = {n for n in app_settings() if n.startswith("BENCH_") or n == "AZURE_CLIENT_ID"}
    assert names == set(SETTING_NAMES)


def test_service_settings_values() -> None:
    s = app_settings()
    assert s["BENCH_LOCAL_EMULATORS"] == "0"
    assert s["BENCH_LOCAL_TIMER_SECONDS"] == "0"
    assert s["BENCH_MAX_DELIVERIES"] == "5"
    assert s["BENCH_API_KEYS"] == ""
    assert s["BENCH_TRUST_EASYAUTH"] == "1"
    assert s["AZURE_CLIENT_ID"] == "appIdentityClientId"
    assert s["BENCH_TARGETS"] == {
        "function": {"type": "string", "parameters": {"value_to_convert": "targets"}}
    }
    params = module("functionapp")["parameters"]
    main = parse(BICEP / "main.bicep")["parameters"]
    assert main["cosmosDatabaseName"]["default"] == "bench"
    assert main["gatePct"]["default"] == "10"
    assert main["botRole"]["default"] == "runner"
    assert params["targets"]["type"] == "array"
    # The Teams bot: off unless deployed; then the app identity and tenant are the bot's.
    assert s["BENCH_API_APP_ID"] == "apiClientId"
    assert s["BENCH_BOT_ISSUERS"] == "" and s["BENCH_GRAPH_URL"] == ""  # the defaults
    app_id = s["BENCH_BOT_APP_ID"]["operator"]["operands"]
    assert (app_id["condition"], app_id["true_value"], app_id["false_value"]) == (
        "teamsBot",
        "appIdentityClientId",
        "",
    )
    tenant = s["BENCH_BOT_TENANT_ID"]["operator"]["operands"]
    assert tenant["condition"] == "teamsBot" and tenant["false_value"] == ""
    assert tenant["true_value"]["operator"]["operands"]["operand_2"] == "tenantId"
    assert params["teamsBot"]["default"] is False


def _accessor(node: Node) -> list[str]:
    """a.b.c as ["a", "b", "c"]."""
    if isinstance(node, str):
        return [node]
    assert isinstance(node, dict)
    operands = node["operator"]["operands"]
    return [*_accessor(operands["operand_1"]), *_accessor(operands["operand_2"])]


def test_the_teams_bot_is_single_tenant_with_the_apps_identity_and_no_secret() -> None:
    tree = module("bot")
    bot = body(tree["resources"]["bot"])
    props = bot["properties"]
    assert bot["kind"] == "azurebot" and bot["location"] == "global"
    assert props["msaAppType"] == "UserAssignedMSI"  # single tenant, a managed identity
    assert props["msaAppId"] == "appIdentityClientId"
    assert props["msaAppMSIResourceId"] == "appIdentityId"
    tenant = props["msaAppTenantId"]["operator"]["operands"]
    assert tenant == {"operand_1": {"function": {"type": "tenant"}}, "operand_2": "tenantId"}
    assert props["endpoint"] == "${apiUrl}/api/messages"
    assert props["disableLocalAuth"] is True
    assert not any(SECRETISH.search(k) for k in props)  # no app password, no secret
    teams = body(tree["resources"]["teams"])
    assert teams["name"] == "MsTeamsChannel"
    assert teams["properties"]["channelName"] == "MsTeamsChannel"
    assert teams["properties"]["properties"]["isEnabled"] is True


def test_main_creates_the_bot_only_when_asked_with_the_apps_identity() -> None:
    main = parse(BICEP / "main.bicep")
    assert main["parameters"]["deployTeamsBot"]["default"] is False
    mod = main["modules"]["teamsBot"]
    assert mod["config"]["condition"] == "deployTeamsBot"
    params = mod["config"]["config"]["params"]
    assert _accessor(params["appIdentityId"]) == ["identities", "outputs", "appId"]
    assert _accessor(params["appIdentityClientId"]) == ["identities", "outputs", "appClientId"]
    assert _accessor(params["apiUrl"]) == ["functionApp", "outputs", "url"]
    assert body(main["modules"]["functionApp"])["params"]["teamsBot"] == "deployTeamsBot"


# ---- f. the Linux agent's cloud-init ----------------------------------------------------

SAMPLE_MOUNTS: list[dict[str, Any]] = [
    {
        "alias": "vol1",
        "kind": "nfs",
        "source": "10.0.0.4:/vol1",
        "nfs_version": "3",
        "nconnect": 8,
        "rsize": 262144,
        "wsize": 262144,
    },
    {
        "alias": "share1",
        "kind": "smb",
        "source": "//benchfiles.file.core.windows.net/share1",
        "smb_secret_name": "smb-share1",
    },
    {"alias": "anf-v41", "kind": "nfs", "source": "10.0.0.5:/vol2", "nfs_version": "4.1"},
]
SAMPLE_PARAMS: dict[str, Any] = {
    "poolName": "anf",
    "apiUrl": "https://func-bench-abc.azurewebsites.net",
    "queueUri": "https://stbenchabc.queue.core.windows.net/",
    "apiScope": "api://11111111-2222-3333-4444-555555555555/.default",
    "agentIdentityClientId": "66666666-7777-8888-9999-000000000000",
    "agentPackageUrl": "https://example.invalid/dist/benchsvc-0.1.0-py3-none-any.whl",
    "agentKeyVaultUri": "https://kv-agt-abc.vault.azure.net/",
    "mounts": SAMPLE_MOUNTS,
}
TOKEN = re.compile(r"@@[A-Z0-9_]+@@")
SMB_CREDENTIALS_UNIT = "benchsvc-smb-credentials.service"


def replaced_tokens(node: Node) -> set[str]:
    return {
        n["function"]["parameters"]["old_string"]
        for n in walk(node)
        if isinstance(n, dict) and n.get("function", {}).get("type") == "replace"
    }


def render_cloud_init(mounts: list[dict[str, Any]]) -> str:
    tree = module("agentpool-linux")
    env = evaluate_variables(tree, {**SAMPLE_PARAMS, "mounts": mounts}, MODULES)
    text: str = env["cloudInit"]
    return text


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


class _VaultStandIn(BaseHTTPRequestHandler):
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
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_the_credentials_file_is_written_mode_0600_whatever_the_umask(tmp_path: Path) -> None:
    """Runs the fetch script cloud-init writes, against a local stand-in for the metadata
    endpoint and Key Vault, with the usual umask 022 and a stale world-readable file."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _VaultStandIn)
    _VaultStandIn.secrets = {"smb-share1": "username=benchfiles\npassword=not-a-real-key\n"}
    _VaultStandIn.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
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
