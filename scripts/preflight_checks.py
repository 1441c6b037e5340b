"""The preflight's checks: pure functions of the facts `scripts/preflight.py` gathers with the
Azure CLI (or reads from a file, as the tests do). Each check returns the problems it finds,
each with the commands that fix it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Json = Any  # what `az ... -o json` returns

ROOT = Path(__file__).resolve().parent.parent
APP_MANIFEST = ROOT / "bicep" / "entra" / "api-app.json"
PREAUTHORIZE_MANIFEST = ROOT / "bicep" / "entra" / "api-preauthorize.json"
PARAMETERS = ROOT / "bicep" / "main.parameters.json"
GRAPH = "https://graph.microsoft.com/v1.0"
# First-party public clients people sign in with (their client ids: azure-identity's
# DEVELOPER_SIGN_ON_CLIENT_ID and AZURE_VSCODE_CLIENT_ID, Az.Accounts' PowerShellClientId).
KNOWN_CLIENTS = {
    "04b07795-8ddb-461a-bbee-02f9e1bf7b46": "the Azure CLI (and azd)",
    "1950a258-227b-4e31-a9cf-717495945fc2": "Azure PowerShell",
    "aebc6443-996d-45c2-90f0-388ff96faa56": "Visual Studio Code",
}
AGENT_ROLE = "Bench.Agent"
VAULT_PREFIXES = ("kv-app-", "kv-agt-")
# azd environment values every deployment needs; the others (bicep/main.parameters.json,
# docs/deploy.md's table) have defaults, and some become needed with a pool (plan checks).
REQUIRED_ENV = ("AZURE_ENV_NAME", "AZURE_LOCATION", "AZURE_RESOURCE_GROUP")
OPTIONAL_ENV = (
    "AZURE_SUBSCRIPTION_ID",
    "BENCH_API_CLIENT_ID",
    "BENCH_VNET_ENABLED",
    "BENCH_NFS_SHARE_GIB",
    "BENCH_POOLS_JSON",
    "BENCH_TARGETS_JSON",
    "BENCH_WINDOWS_POOL_JSON",
    "BENCH_WINDOWS_ADMIN_PASSWORD",
    "BENCH_AGENT_SUBNET_ID",
    "BENCH_AGENT_PACKAGE_URL",
    "BENCH_AGENT_SSH_PUBLIC_KEY",
    "BENCH_AGENT_ENCRYPTION_AT_HOST",
    "AGENT_KEY_VAULT_NAME",
)


@dataclass(frozen=True)
class Problem:
    what: str
    fix: list[str] = field(default_factory=list)  # commands, one a line
    details: list[str] = field(default_factory=list)

    def render(self) -> str:
        lines = [f"- {self.what}"]
        lines += [f"    * {d}" for d in self.details]
        lines += ["  fix:" if self.fix else ""] + [f"    {f}" for f in self.fix]
        return "\n".join(line for line in lines if line)


@dataclass(frozen=True)
class Facts:
    env: dict[str, str]
    parameters: dict[str, Json]  # literal values in bicep/main.parameters.json
    account: Json | None  # az account show
    encryption_at_host: Json | None  # az feature show ... EncryptionAtHost
    api_app: Json | None  # az ad app show --id <client id>
    api_sp: Json | None  # az ad sp show --id <client id>
    deleted_vaults: list[Json]  # az keyvault list-deleted --resource-type vault
    # None: not asked (not signed in) or not answered; the checks that need them then pass.
    flex_locations: list[Json] | None = None  # az functionapp list-flexconsumption-locations
    vm_usage: list[Json] | None = None  # az vm list-usage --location
    vm_skus: list[Json] | None = None  # az vm list-skus --location --size (each pool size)
    scale_sets: list[Json] | None = None  # az vmss list --resource-group
    authorization_policy: Json | None = None  # Graph /policies/authorizationPolicy
    directory_roles: list[Json] | None = None  # Graph /me/memberOf/microsoft.graph.directoryRole
    app_management_policy: Json | None = None  # Graph /policies/defaultAppManagementPolicy
    agent_vault_secrets: list[str] | None = None  # az keyvault secret list (names)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Facts:
        return cls(
            env=data.get("env", {}),
            parameters=data.get("parameters", {}),
            account=data.get("account"),
            encryption_at_host=data.get("encryption_at_host"),
            api_app=data.get("api_app"),
            api_sp=data.get("api_sp"),
            deleted_vaults=data.get("deleted_vaults", []),
            flex_locations=data.get("flex_locations"),
            vm_usage=data.get("vm_usage"),
            vm_skus=data.get("vm_skus"),
            scale_sets=data.get("scale_sets"),
            authorization_policy=data.get("authorization_policy"),
            directory_roles=data.get("directory_roles"),
            app_management_policy=data.get("app_management_policy"),
            agent_vault_secrets=data.get("agent_vault_secrets"),
        )


def manifest(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


# ---- checks: facts in, problems out -----------------------------------------------------


def check_env(f: Facts) -> list[Problem]:
    missing = [k for k in REQUIRED_ENV if not f.env.get(k)]
    return [
        Problem(
            f"{name} is not set in the azd environment (bicep/main.parameters.json needs it)",
            [f"azd env set {name} <value>   # docs/deploy.md, step 5"],
        )
        for name in missing
    ]


def check_account(f: Facts) -> list[Problem]:
    if f.account is None:
        return [Problem("the Azure CLI is not signed in", ["az login", "azd auth login"])]
    wanted = f.env.get("AZURE_SUBSCRIPTION_ID")
    if wanted and f.account.get("id") != wanted:
        return [
            Problem(
                f"the Azure CLI uses subscription {f.account.get('id')}, azd {wanted}",
                [f"az account set --subscription {wanted}"],
            )
        ]
    return []


def encryption_at_host_wanted(f: Facts) -> bool:
    """Only agent VMs use it: no pool, nothing to check."""
    has_pool = any(
        f.env.get(k, "").strip() not in ("", "[]")
        for k in ("BENCH_POOLS_JSON", "BENCH_WINDOWS_POOL_JSON")
    )
    return has_pool and f.env.get("BENCH_AGENT_ENCRYPTION_AT_HOST", "true").lower() != "false"


def check_encryption_at_host(f: Facts) -> list[Problem]:
    if not encryption_at_host_wanted(f):
        return []
    state = ((f.encryption_at_host or {}).get("properties") or {}).get("state", "NotRegistered")
    if state == "Registered":
        return []
    return [
        Problem(
            f"agentEncryptionAtHost is on but the subscription feature "
            f"Microsoft.Compute/EncryptionAtHost is {state}; the agent scale sets would fail",
            [
                "az feature register --namespace Microsoft.Compute --name EncryptionAtHost",
                "az feature show --namespace Microsoft.Compute --name EncryptionAtHost "
                "--query properties.state   # wait for Registered (minutes)",
                "az provider register --namespace Microsoft.Compute",
                "or: azd env set BENCH_AGENT_ENCRYPTION_AT_HOST false",
            ],
        )
    ]


def app_registration_fixes(client_id: str) -> list[str]:
    obj = f"$(az ad app show --id {client_id} --query id -o tsv)"
    patch = (
        f"az rest --method PATCH --uri {GRAPH}/applications/{obj}"
        " --headers Content-Type=application/json"
    )
    return [
        f"az ad app update --id {client_id} --identifier-uris api://{client_id}",
        f"{patch} --body @bicep/entra/api-app.json",
        f"{patch} --body @bicep/entra/api-preauthorize.json",
        "(docs/deploy.md, step 3b)",
    ]


def _api_wrong(app: Json, client_id: str, scope: Json) -> list[str]:
    """The exposed API: its URI, v2 tokens and the scope of bicep/entra/api-app.json."""
    api = app.get("api") or {}
    wrong = []
    if f"api://{client_id}" not in (app.get("identifierUris") or []):
        wrong.append(f"application ID URI api://{client_id} is missing")
    if api.get("requestedAccessTokenVersion") != 2:
        wrong.append("access tokens are not v2 (api.requestedAccessTokenVersion)")
    scopes = {s.get("id"): s for s in api.get("oauth2PermissionScopes") or []}
    have = scopes.get(scope["id"])
    if not have or not have.get("isEnabled") or have.get("value") != scope["value"]:
        wrong.append(f"scope {scope['value']} ({scope['id']}) is not exposed")
    return wrong


def _preauthorized_wrong(api: Json, want_pre: list[Json], scope: Json) -> list[str]:
    pre = {
        p.get("appId"): set(p.get("delegatedPermissionIds") or [])
        for p in api.get("preAuthorizedApplications") or []
    }
    wrong = []
    for p in want_pre:
        if not set(p["delegatedPermissionIds"]) <= pre.get(p["appId"], set()):
            who = KNOWN_CLIENTS.get(p["appId"], p["appId"])
            wrong.append(
                f"{who} is not pre-authorized for {scope['value']}: people signing in with "
                "it get AADSTS65001"
            )
    return wrong


def _roles_wrong(app: Json, want_roles: list[Json]) -> list[str]:
    roles = {r.get("value"): r for r in app.get("appRoles") or []}
    wrong = []
    for r in want_roles:
        got = roles.get(r["value"])
        if not got or not got.get("isEnabled"):
            wrong.append(f"app role {r['value']} is missing or disabled")
        elif set(got.get("allowedMemberTypes") or []) != set(r["allowedMemberTypes"]):
            wrong.append(
                f"app role {r['value']} is not for {' and '.join(r['allowedMemberTypes'])}"
            )
    return wrong


def check_api_app(f: Facts) -> list[Problem]:
    client_id = f.env.get("BENCH_API_CLIENT_ID", "")
    if not client_id:
        return []  # reported by check_env
    app = f.api_app
    if app is None:
        return [
            Problem(
                f"no app registration with client id {client_id} (BENCH_API_CLIENT_ID)",
                [
                    "create it as docs/deploy.md, step 3b says",
                    "or: azd env set BENCH_API_CLIENT_ID ''   # the template creates one (3a)",
                ],
            )
        ]
    want = manifest(APP_MANIFEST)
    want_pre = manifest(PREAUTHORIZE_MANIFEST)["api"]["preAuthorizedApplications"]
    (scope,) = want["api"]["oauth2PermissionScopes"]
    api = app.get("api") or {}
    wrong = [
        *_api_wrong(app, client_id, scope),
        *_preauthorized_wrong(api, want_pre, scope),
        *_roles_wrong(app, want["appRoles"]),
    ]
    if not wrong:
        return []
    what = f"app registration {client_id} (BENCH_API_CLIENT_ID) is not set up for the service"
    return [Problem(what, app_registration_fixes(client_id), wrong)]


def check_api_sp(f: Facts) -> list[Problem]:
    client_id = f.env.get("BENCH_API_CLIENT_ID", "")
    if not client_id or f.api_app is None:
        return []
    if f.api_sp is None:
        return [
            Problem(
                f"app registration {client_id} has no service principal (enterprise app)",
                [
                    f"az ad sp create --id {client_id}",
                    f"az ad sp update --id {client_id} --set appRoleAssignmentRequired=true",
                ],
            )
        ]
    if f.api_sp.get("appRoleAssignmentRequired") is not True:
        return [
            Problem(
                f"anyone in the tenant can get a token for {client_id}: its service principal "
                "does not require an assignment",
                [f"az ad sp update --id {client_id} --set appRoleAssignmentRequired=true"],
            )
        ]
    return []


def resource_group_of(resource_id: str) -> str:
    parts = resource_id.split("/")
    lowered = [p.lower() for p in parts]
    return parts[lowered.index("resourcegroups") + 1] if "resourcegroups" in lowered else ""


def blocking_vaults(f: Facts) -> list[Json]:
    """Soft-deleted vaults of this environment: the names the deployment would create."""
    group = f.env.get("AZURE_RESOURCE_GROUP", "").lower()
    env_name = f.env.get("AZURE_ENV_NAME", "")
    found = []
    for v in f.deleted_vaults:
        props = v.get("properties") or {}
        tags = props.get("tags") or {}
        if not str(v.get("name", "")).startswith(VAULT_PREFIXES):
            continue
        if resource_group_of(str(props.get("vaultId", ""))).lower() != group:
            continue
        if tags.get("azd-env-name", env_name) != env_name:
            continue
        found.append(v)
    return found


def check_deleted_vaults(f: Facts) -> list[Problem]:
    problems = []
    for v in blocking_vaults(f):
        props = v.get("properties") or {}
        name, location = v["name"], props.get("location", "")
        protected = props.get("purgeProtectionEnabled") is True
        fixes = [
            "python3 scripts/preflight.py recover-vaults   # keeps the secrets; then azd up",
        ]
        if protected:
            until = props.get("scheduledPurgeDate")
            fixes.append(f"(purge protection is on: it cannot be purged before {until})")
        else:
            fixes.append(
                f"or: az keyvault purge --name {name} --location {location}   # secrets lost"
            )
        fixes.append("or deploy under another environment name (azd env new) or resource group")
        problems.append(
            Problem(
                f"Key Vault {name} was deleted ({props.get('deletionDate')}) and is soft-deleted: "
                "the deployment cannot create a vault of that name",
                fixes,
            )
        )
    return problems


def problems_of(f: Facts) -> list[Problem]:
    # The plan's checks (pools, region, quota, the registration's path) in their own module.
    from preflight_plan import PLAN_CHECKS

    checks = (
        check_env,
        check_account,
        check_encryption_at_host,
        check_api_app,
        check_api_sp,
        check_deleted_vaults,
        *PLAN_CHECKS,
    )
    return [p for check in checks for p in check(f)]
