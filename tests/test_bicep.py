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
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from pycep import BicepParser

from adapters.config import SETTING_NAMES
from adapters.cosmos import CONTAINERS
from agent.config import AgentConfig

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
    """A resource's declaration, looped or not."""
    config: dict[str, Any] = resource["config"]
    return config["config"] if "loop_type" in config else config


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

INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.]*)\}")


def _lookup(dotted: str, env: dict[str, Any]) -> Any:
    first, *rest = dotted.split(".")
    value = env[first]
    for key in rest:
        value = value[key]
    return value


def _to_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def evaluate(node: Node, env: dict[str, Any], base: Path) -> Any:
    if node is None or isinstance(node, bool | int | float):
        return node
    if isinstance(node, str):
        if node in env:
            return env[node]
        return INTERPOLATION.sub(lambda m: _to_text(_lookup(m.group(1), env)), node)
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
            return [x for v in values for x in v]
        if fn == "base64":
            return base64.b64encode(values[0].encode()).decode()
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
}


@pytest.mark.parametrize("path", BICEP_FILES, ids=lambda p: p.relative_to(BICEP).as_posix())
def test_every_top_level_resource_is_tagged(path: Path) -> None:
    for name, resource in parse(path).get("resources", {}).items():
        top_level = resource["type"].count("/") == 1
        if resource["existing"] or not top_level or resource["type"] in UNTAGGED_TYPES:
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
    for name, param in parse(path)["parameters"].items():
        secure = any(d["type"] == "secure" for d in param["decorators"])
        if secure:
            assert param["default"] is None, f"{path.name}: @secure() param {name} has a default"
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
    activities = body(tree["resources"]["activities"])["properties"]["resource"]
    found[activities["id"]] = activities["partitionKey"]["paths"][0]
    assert found == CONTAINERS
    assert activities["defaultTtl"] == "activityTtlSeconds"
    assert tree["parameters"]["activityTtlSeconds"]["default"] == 86400


def test_key_vaults_use_rbac() -> None:
    props = the(module("keyvault"), "Microsoft.KeyVault/vaults")["properties"]
    assert props["enableRbacAuthorization"] is True
    assert props["enableSoftDelete"] is True
    assert props["enablePurgeProtection"] is True
    assert "accessPolicies" not in props


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
    assert glob["excludedPaths"] == ["/api/bot/teams", "/api/bot/webhook", "/api/health"]
    aad = auth["properties"]["identityProviders"]["azureActiveDirectory"]
    assert aad["enabled"] is True
    assert aad["registration"]["clientId"] == "apiClientId"


# ---- d. least-privilege role assignments ------------------------------------------------

BUILT_IN_ROLES = {
    "c6a89b2d-59bc-44d0-9896-0f6e12d7b80a": "Storage Queue Data Message Sender",
    "b7e6dc6d-f1e8-4753-8033-0f276bb0955b": "Storage Blob Data Owner",
    "4633458b-17de-408a-b874-0445c86b69e6": "Key Vault Secrets User",
    "3913510d-42f4-4e42-8a64-420c390055eb": "Monitoring Metrics Publisher",
    "00000000-0000-0000-0000-000000000002": "Cosmos DB Built-in Data Contributor",
}
CUSTOM_QUEUE_ROLE = "custom: queue agent"

# (principal, role, scope): the whole table; widening a scope or adding a role fails here.
EXPECTED_ASSIGNMENTS = {
    ("app", "Storage Queue Data Message Sender", "queue: bench-<pool>"),
    ("app", "Storage Queue Data Message Sender", "queue: bench-<pool>-poison"),
    ("app", "Storage Blob Data Owner", "storage account"),
    ("app", "Key Vault Secrets User", "key vault: app"),
    ("app", "Monitoring Metrics Publisher", "application insights"),
    ("app", "Cosmos DB Built-in Data Contributor", "cosmos database"),
    ("agent", CUSTOM_QUEUE_ROLE, "queue: bench-<pool>"),
    ("agent", "Key Vault Secrets User", "key vault: agent"),
}
PRINCIPALS = {"appPrincipalId": "app", "agentPrincipalId": "agent"}


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
    if rtype == "Microsoft.KeyVault/vaults":
        return {"appKeyVaultName": "key vault: app", "agentKeyVaultName": "key vault: agent"}[name]
    return kinds[rtype]


def _role(tree: dict[str, Any], definition: Node) -> str:
    roles = tree["variables"]["roles"]["value"]
    fn = definition["function"]
    assert fn["type"] == "subscription_resource_id", definition
    assert fn["parameters"]["resource_type"] == "Microsoft.Authorization/roleDefinitions"
    ref = fn["parameters"]["resource_name_1"]["operator"]["operands"]
    if ref["operand_1"] == "queueAgentRole":
        return CUSTOM_QUEUE_ROLE
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
                PRINCIPALS[props["principalId"]],
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


def test_only_the_role_module_assigns_roles() -> None:
    for path in BICEP_FILES:
        if path.name == "roleassignments.bicep":
            continue
        types = {r["type"] for r in parse(path).get("resources", {}).values()}
        assert not any("roleAssignments" in t or "roleDefinitions" in t for t in types), path


def test_main_passes_each_identity_to_its_own_principal() -> None:
    params = body(parse(BICEP / "main.bicep")["modules"]["roles"])["params"]
    for name in ("appPrincipalId", "agentPrincipalId"):
        # identities.outputs.<name>
        accessor = params[name]["operator"]["operands"]
        assert accessor["operand_1"] == "identities"
        assert accessor["operand_2"]["operator"]["operands"] == {
            "operand_1": "outputs",
            "operand_2": name,
        }


def test_the_agents_custom_role_can_only_process_messages_in_this_resource_group() -> None:
    tree = module("roleassignments")
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
    assert main["defaultRole"]["default"] == "runner"
    assert main["botRole"]["default"] == "runner"
    assert params["targets"]["type"] == "array"


# ---- f. the Linux agent's cloud-init ----------------------------------------------------

SAMPLE_MOUNTS = [
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


def replaced_tokens(node: Node) -> set[str]:
    return {
        n["function"]["parameters"]["old_string"]
        for n in walk(node)
        if isinstance(n, dict) and n.get("function", {}).get("type") == "replace"
    }


@cache
def rendered_cloud_init() -> str:
    tree = module("agentpool-linux")
    env = evaluate_variables(tree, SAMPLE_PARAMS, MODULES)
    text: str = env["cloudInit"]
    return text


def cloud_init() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(rendered_cloud_init())
    return data


def write_file(path: str) -> str:
    (entry,) = [f for f in cloud_init()["write_files"] if f["path"] == path]
    content: str = entry["content"]
    return content


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
    assert pip[1] == "install" and pip[-1] == SAMPLE_PARAMS["agentPackageUrl"]
    assert runcmd.index(pip) < runcmd.index(["systemctl", "enable", "--now", "benchsvc-agent"])


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
    }
    assert config["mounts"] == {"vol1": "/mnt/bench/vol1", "share1": "/mnt/bench/share1"}
    assert config["imds"] is True
    assert config["api_scope"] == SAMPLE_PARAMS["apiScope"]
    assert config["managed_identity_client_id"] == SAMPLE_PARAMS["agentIdentityClientId"]
    assert config["pool"] == "anf"


def test_mounts_are_fstab_entries_under_mnt_bench() -> None:
    mounts = cloud_init()["mounts"]
    nfs, smb = mounts
    assert nfs[:3] == ["10.0.0.4:/vol1", "/mnt/bench/vol1", "nfs"]
    options = nfs[3].split(",")
    for opt in (
        "vers=3",
        "nconnect=8",
        "rsize=262144",
        "wsize=262144",
        "hard",
        "_netdev",
        "nofail",
    ):
        assert opt in options
    assert smb[:3] == ["//benchfiles.file.core.windows.net/share1", "/mnt/bench/share1", "cifs"]
    assert "credentials=/etc/benchsvc/smb-share1.cred" in smb[3].split(",")
    assert not any("password=" in o or "username=" in o for o in smb[3].split(","))
    mkdir = cloud_init()["runcmd"][0]
    assert mkdir == ["mkdir", "-p", "/mnt/bench", "/mnt/bench/vol1", "/mnt/bench/share1"]
    runcmd = cloud_init()["runcmd"]
    fetch = ["python3", "/usr/local/lib/benchsvc/fetch-smb-credentials.py"]
    assert runcmd.index(fetch) < runcmd.index(["mount", "-a"])


def test_smb_credentials_come_from_the_agent_vault_by_identity() -> None:
    smb = json.loads(write_file("/etc/benchsvc/smb.json"))
    assert smb["vault_uri"] == SAMPLE_PARAMS["agentKeyVaultUri"]
    assert smb["client_id"] == SAMPLE_PARAMS["agentIdentityClientId"]
    assert {m["alias"]: m["secret"] for m in smb["mounts"] if m["kind"] == "smb"} == {
        "share1": "smb-share1"
    }
    compile(write_file("/usr/local/lib/benchsvc/fetch-smb-credentials.py"), "fetch", "exec")


def test_the_service_runs_benchagent_with_the_config_and_is_enabled() -> None:
    unit = write_file("/etc/systemd/system/benchsvc-agent.service")
    exec_start = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert exec_start == [
        "ExecStart=/opt/benchsvc/bin/benchagent --config /etc/benchsvc/agent.json"
    ]
    assert "RequiresMountsFor=/mnt/bench/vol1 /mnt/bench/share1" in unit.splitlines()
    assert ["systemctl", "enable", "--now", "benchsvc-agent"] in cloud_init()["runcmd"]


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
