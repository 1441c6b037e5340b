"""Check an Azure subscription and tenant before deploying bicep/main.bicep; grant the agents
their app role afterwards. Standard library and the Azure CLI only.

    python3 scripts/preflight.py [check]          # azd preprovision hook (azure.yaml)
    python3 scripts/preflight.py grant-agent-role # azd postprovision hook
    python3 scripts/preflight.py recover-vaults   # after azd down: bring the vaults back

`check` reads what it needs with `az` (read-only) and fails, before anything is deployed,
with the command that fixes each problem:
- the azd environment values bicep/main.parameters.json reads are set;
- the EncryptionAtHost feature is registered when agentEncryptionAtHost is on (Microsoft
  Learn, "Enable end-to-end encryption using encryption at host - Azure CLI");
- the API's app registration exposes the scope of bicep/entra/api-app.json, pre-authorizes
  the Azure CLI for it (else `az login` users get AADSTS65001), has the Bench.* app roles, and
  its service principal requires an assignment;
- no soft-deleted Key Vault of this environment holds the names the deployment would create.

`--facts FILE` checks facts recorded earlier (`--dump-facts FILE` writes them) instead of
asking Azure: the checks are tested that way.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
# azd environment values bicep/main.parameters.json reads.
REQUIRED_ENV = (
    "AZURE_ENV_NAME",
    "AZURE_LOCATION",
    "AZURE_RESOURCE_GROUP",
    "BENCH_API_CLIENT_ID",
    "BENCH_AGENT_SUBNET_ID",
    "BENCH_AGENT_PACKAGE_URL",
    "BENCH_AGENT_SSH_PUBLIC_KEY",
)
OPTIONAL_ENV = ("AZURE_SUBSCRIPTION_ID", "AGENT_PRINCIPAL_ID")

Json = Any  # what `az ... -o json` returns


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
    return f.parameters.get("agentEncryptionAtHost", True) is not False


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
                'or set "agentEncryptionAtHost": {"value": false} in bicep/main.parameters.json',
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
        "(docs/deploy.md, step 3)",
    ]


def check_api_app(f: Facts) -> list[Problem]:
    client_id = f.env.get("BENCH_API_CLIENT_ID", "")
    if not client_id:
        return []  # reported by check_env
    app = f.api_app
    if app is None:
        return [
            Problem(
                f"no app registration with client id {client_id} (BENCH_API_CLIENT_ID)",
                ["create it as docs/deploy.md, step 3 says"],
            )
        ]
    want = manifest(APP_MANIFEST)
    want_pre = manifest(PREAUTHORIZE_MANIFEST)["api"]["preAuthorizedApplications"]
    (scope,) = want["api"]["oauth2PermissionScopes"]
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
    pre = {
        p.get("appId"): set(p.get("delegatedPermissionIds") or [])
        for p in api.get("preAuthorizedApplications") or []
    }
    for p in want_pre:
        if not set(p["delegatedPermissionIds"]) <= pre.get(p["appId"], set()):
            who = KNOWN_CLIENTS.get(p["appId"], p["appId"])
            wrong.append(
                f"{who} is not pre-authorized for {scope['value']}: people signing in with "
                "it get AADSTS65001"
            )
    roles = {r.get("value"): r for r in app.get("appRoles") or []}
    for r in want["appRoles"]:
        got = roles.get(r["value"])
        if not got or not got.get("isEnabled"):
            wrong.append(f"app role {r['value']} is missing or disabled")
        elif set(got.get("allowedMemberTypes") or []) != set(r["allowedMemberTypes"]):
            wrong.append(
                f"app role {r['value']} is not for {' and '.join(r['allowedMemberTypes'])}"
            )
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


CHECKS = (
    check_env,
    check_account,
    check_encryption_at_host,
    check_api_app,
    check_api_sp,
    check_deleted_vaults,
)


def problems_of(f: Facts) -> list[Problem]:
    return [p for check in CHECKS for p in check(f)]


# ---- the Azure CLI ------------------------------------------------------------------------


class AzError(Exception):
    pass


def az(*args: str) -> Json:
    try:
        out = subprocess.run(["az", *args, "-o", "json"], capture_output=True, text=True)
    except FileNotFoundError:
        raise AzError("the Azure CLI (az) is not installed") from None
    if out.returncode != 0:
        raise AzError(out.stderr.strip() or f"az {' '.join(args)} failed")
    return json.loads(out.stdout) if out.stdout.strip() else None


def az_or_none(*args: str) -> Json | None:
    try:
        return az(*args)
    except AzError:
        return None


def literal_parameters() -> dict[str, Json]:
    params = json.loads(PARAMETERS.read_text())["parameters"]
    return {
        k: v["value"]
        for k, v in params.items()
        if "value" in v and not (isinstance(v["value"], str) and v["value"].startswith("${"))
    }


def environment() -> dict[str, str]:
    """azd passes its environment's values to hooks; run by hand, ask azd for them."""
    values = dict(os.environ)
    if "AZURE_ENV_NAME" not in values:
        try:
            out = subprocess.run(
                ["azd", "env", "get-values", "--output", "json"], capture_output=True, text=True
            )
            if out.returncode == 0:
                values = {**json.loads(out.stdout), **values}
        except (FileNotFoundError, json.JSONDecodeError):
            pass
    return values


def gather() -> Facts:
    values = environment()
    env = {k: values.get(k, "") for k in (*REQUIRED_ENV, *OPTIONAL_ENV)}
    account = az_or_none("account", "show")
    client_id = env["BENCH_API_CLIENT_ID"]
    signed_in = account is not None
    return Facts(
        env=env,
        parameters=literal_parameters(),
        account=account,
        encryption_at_host=az_or_none(
            "feature", "show", "--namespace", "Microsoft.Compute", "--name", "EncryptionAtHost"
        )
        if signed_in
        else None,
        api_app=az_or_none("ad", "app", "show", "--id", client_id)
        if signed_in and client_id
        else None,
        api_sp=az_or_none("ad", "sp", "show", "--id", client_id)
        if signed_in and client_id
        else None,
        deleted_vaults=(az_or_none("keyvault", "list-deleted", "--resource-type", "vault") or [])
        if signed_in
        else [],
    )


# ---- commands -----------------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    facts = Facts.from_json(json.loads(Path(args.facts).read_text())) if args.facts else gather()
    if args.dump_facts:
        Path(args.dump_facts).write_text(json.dumps(dataclasses.asdict(facts), indent=2) + "\n")
    problems = problems_of(facts)
    if not problems:
        print("preflight: ready to deploy")
        return 0
    print(f"preflight: {len(problems)} problem(s) to fix before deploying:")
    for p in problems:
        print(p.render())
    return 1


def cmd_recover_vaults(args: argparse.Namespace) -> int:
    facts = gather()
    vaults = blocking_vaults(facts)
    if not vaults:
        print("recover-vaults: no soft-deleted vault of this environment")
        return 0
    group, location = facts.env["AZURE_RESOURCE_GROUP"], facts.env["AZURE_LOCATION"]
    if az_or_none("group", "show", "--name", group) is None:
        az(
            "group",
            "create",
            "--name",
            group,
            "--location",
            location,
            "--tags",
            f"azd-env-name={facts.env['AZURE_ENV_NAME']}",
        )
    for v in vaults:
        print(f"recover-vaults: recovering {v['name']} (with its secrets)")
        az("keyvault", "recover", "--name", v["name"])
    return 0


def cmd_grant_agent_role(args: argparse.Namespace) -> int:
    """With assignment required on the API, a managed identity gets no token without an app
    role (Microsoft Learn, "Restrict your Microsoft Entra app to a set of users")."""
    values = environment()
    client_id = values.get("BENCH_API_CLIENT_ID", "")
    agent = values.get("AGENT_PRINCIPAL_ID", "")
    if not client_id or not agent:
        print("grant-agent-role: needs BENCH_API_CLIENT_ID and AGENT_PRINCIPAL_ID (azd sets them)")
        return 2
    (role_id,) = [r["id"] for r in manifest(APP_MANIFEST)["appRoles"] if r["value"] == AGENT_ROLE]
    sp = f"$(az ad sp show --id {client_id} --query id -o tsv)"
    try:
        sp = az("ad", "sp", "show", "--id", client_id)["id"]
        uri = f"{GRAPH}/servicePrincipals/{sp}/appRoleAssignedTo"
        granted = az("rest", "--method", "GET", "--uri", uri)["value"]
        if any(a["principalId"] == agent and a["appRoleId"] == role_id for a in granted):
            print(f"grant-agent-role: the agents' identity already has {AGENT_ROLE}")
            return 0
        body = json.dumps({"principalId": agent, "resourceId": sp, "appRoleId": role_id})
        az(
            "rest",
            "--method",
            "POST",
            "--uri",
            uri,
            "--headers",
            "Content-Type=application/json",
            "--body",
            body,
        )
    except AzError as e:
        body = json.dumps({"principalId": agent, "resourceId": sp, "appRoleId": role_id})
        print(f"grant-agent-role: {e}")
        print(
            "An owner of the API's enterprise application (or a Cloud Application Administrator)"
            f" must run:\n    az rest --method POST --uri {GRAPH}/servicePrincipals/{sp}/"
            f"appRoleAssignedTo --headers Content-Type=application/json --body '{body}'"
        )
        return 1
    print(f"grant-agent-role: gave the agents' identity {agent} the app role {AGENT_ROLE}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="preflight", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    check = sub.add_parser("check", help="check before deploying (default)")
    for p in (parser, check):
        p.add_argument("--facts", help="check recorded facts (JSON) instead of asking Azure")
        p.add_argument("--dump-facts", metavar="FILE", help="also write the facts gathered")
    sub.add_parser("recover-vaults", help="recover this environment's soft-deleted vaults")
    sub.add_parser("grant-agent-role", help=f"give the agents' identity {AGENT_ROLE}")
    args = parser.parse_args(argv)
    commands = {"recover-vaults": cmd_recover_vaults, "grant-agent-role": cmd_grant_agent_role}
    return commands.get(args.command, cmd_check)(args)


if __name__ == "__main__":
    sys.exit(main())
