"""Check an Azure subscription and tenant before deploying bicep/main.bicep; grant the agents
their app role afterwards. Standard library and the Azure CLI only.

    python3 scripts/preflight.py [check]          # the checks, by hand (read-only)
    python3 scripts/preflight.py preprovision     # azd preprovision hook: check, keep capacities
    python3 scripts/preflight.py postprovision    # azd postprovision hook (manual registration)
    python3 scripts/preflight.py recover-vaults   # after azd down: bring the vaults back

`check` reads what it needs with `az` (read-only) and fails, before anything is deployed,
with the command that fixes each problem:
- the azd environment values every deployment needs are set, and those a pool needs when
  BENCH_POOLS_JSON or BENCH_WINDOWS_POOL_JSON deploys one (scripts/preflight_plan.py);
- no pool mounts a placeholder from bicep/examples/pools.json; an Azure Files NFS share is
  mounted with NFS 4.1; an SMB mount's secret exists for its pool's identity;
- the region offers Flex Consumption (`az functionapp list-flexconsumption-locations`) and
  the pools fit the region's vCPU quota (`az vm list-usage`);
- the EncryptionAtHost feature is registered when a pool uses it (Microsoft Learn, "Enable
  end-to-end encryption using encryption at host - Azure CLI");
- which path makes the API's app registration, and that it can: the template's (Microsoft
  Graph Bicep extension; you may create applications, the tenant takes an
  api://<tenant id>/<name> URI), or the manual one (BENCH_API_CLIENT_ID): the registration
  exposes the scope of bicep/entra/api-app.json, pre-authorizes the Azure CLI for it (else
  `az login` users get AADSTS65001), has the Bench.* app roles, and its service principal
  requires an assignment;
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
from pathlib import Path

# Run as a script (azd hooks): its own folder is on sys.path.
from preflight_checks import (
    AGENT_ROLE,
    APP_MANIFEST,
    GRAPH,
    OPTIONAL_ENV,
    PARAMETERS,
    REQUIRED_ENV,
    Facts,
    Json,
    blocking_vaults,
    manifest,
    problems_of,
)
from preflight_plan import elastic_capacities, notes_of, plan, registration_path

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


def pool_sizes(env: dict[str, str]) -> set[str]:
    facts = Facts(env, {}, None, None, None, None, [])
    try:
        pools, windows = plan(facts)
    except ValueError:
        return set()
    return {str(p.get("vmSize")) for p in [*pools, *([windows] if windows else [])]}


def _az_if(wanted: object, *args: str) -> Json | None:
    """``az`` only when the facts it reads are needed (signed in, an id given, ...)."""
    return az_or_none(*args) if wanted else None


MY_ROLES = "me/memberOf/microsoft.graph.directoryRole"


def _graph_if(wanted: object, path: str) -> Json | None:
    return _az_if(wanted, "rest", "--method", "GET", "--uri", f"{GRAPH}/{path}")


def _skus(sizes: set[str], location: str) -> list[Json]:
    """Each pool size's SKU in the region (its family, its restrictions)."""
    return [
        sku
        for size in sorted(sizes)
        for sku in az_or_none(
            "vm",
            "list-skus",
            "--location",
            location,
            "--size",
            size,
            "--resource-type",
            "virtualMachines",
        )
        or []
        if sku.get("name") == size
    ]


def gather() -> Facts:
    values = environment()
    env = {k: values.get(k, "") for k in (*REQUIRED_ENV, *OPTIONAL_ENV)}
    account = az_or_none("account", "show")
    client_id = env["BENCH_API_CLIENT_ID"]
    signed_in = account is not None
    location, group = env["AZURE_LOCATION"], env["AZURE_RESOURCE_GROUP"]
    sizes = pool_sizes(env) if signed_in and location else set()
    skus = _skus(sizes, location)
    vault = env["AGENT_KEY_VAULT_NAME"]
    app = signed_in and client_id
    # Without a registration of their own, the template's path: what the user may do.
    template = signed_in and not client_id
    return Facts(
        env=env,
        parameters=literal_parameters(),
        account=account,
        encryption_at_host=_az_if(
            signed_in,
            *("feature", "show", "--namespace", "Microsoft.Compute", "--name", "EncryptionAtHost"),
        ),
        api_app=_az_if(app, "ad", "app", "show", "--id", client_id),
        api_sp=_az_if(app, "ad", "sp", "show", "--id", client_id),
        deleted_vaults=_az_if(signed_in, "keyvault", "list-deleted", "--resource-type", "vault")
        or [],
        flex_locations=_az_if(signed_in, "functionapp", "list-flexconsumption-locations"),
        vm_usage=_az_if(sizes, "vm", "list-usage", "--location", location),
        vm_skus=skus if sizes else None,
        scale_sets=_az_if(signed_in and group, "vmss", "list", "--resource-group", group),
        authorization_policy=_graph_if(template, "policies/authorizationPolicy"),
        directory_roles=(_graph_if(template, MY_ROLES) or {}).get("value") if template else None,
        app_management_policy=_graph_if(template, "policies/defaultAppManagementPolicy"),
        agent_vault_secrets=_az_if(
            signed_in and vault,
            *("keyvault", "secret", "list", "--vault-name", vault, "--query", "[].name"),
        ),
    )


# ---- commands -----------------------------------------------------------------------------


def cmd_check(args: argparse.Namespace) -> int:
    facts = Facts.from_json(json.loads(Path(args.facts).read_text())) if args.facts else gather()
    if args.dump_facts:
        Path(args.dump_facts).write_text(json.dumps(dataclasses.asdict(facts), indent=2) + "\n")
    return cmd_check_facts(facts)


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


def cmd_preprovision(args: argparse.Namespace) -> int:
    """azd's preprovision hook: the checks, then each elastic pool's current capacity into
    the environment (BENCH_ELASTIC_CAPACITIES), so that the deployment keeps it instead of
    setting 0 under running agents (azd reads the environment again before the parameters,
    Azure/azure-dev#6063)."""
    facts = Facts.from_json(json.loads(Path(args.facts).read_text())) if args.facts else gather()
    status = cmd_check_facts(facts)
    if status:
        return status
    capacities = json.dumps(elastic_capacities(facts), sort_keys=True)
    if args.facts:
        print(f"preflight: BENCH_ELASTIC_CAPACITIES={capacities}")
        return 0
    out = subprocess.run(["azd", "env", "set", "BENCH_ELASTIC_CAPACITIES", capacities])
    return 0 if out.returncode == 0 else 1


def cmd_check_facts(facts: Facts) -> int:
    for note in notes_of(facts):
        print(f"preflight: {note}")
    problems = problems_of(facts)
    if not problems:
        print("preflight: ready to deploy")
        return 0
    print(f"preflight: {len(problems)} problem(s) to fix before deploying:")
    for p in problems:
        print(p.render())
    return 1


def cmd_postprovision(args: argparse.Namespace) -> int:
    """azd's postprovision hook. The template path made everything; the manual path still
    needs, on the existing registration: each pool identity's Bench.Agent, and the web
    sign-in (redirect URI, ID tokens, the app identity's federated credential)."""
    values = environment()
    facts = Facts(values, {}, None, None, None, None, [])
    if registration_path(facts) == "template":
        print("postprovision: the template made the API's registration and its roles")
        return 0
    status = 0
    for principal in filter(None, values.get("AGENT_PRINCIPAL_IDS", "").split(",")):
        status |= grant_agent_role(values.get("BENCH_API_CLIENT_ID", ""), principal)
    return status | web_sign_in(values)


def web_sign_in(values: dict[str, str]) -> int:
    client_id, api_url = values.get("BENCH_API_CLIENT_ID", ""), values.get("API_URL", "")
    subject = values.get("APP_IDENTITY_PRINCIPAL_ID", "")
    if not (client_id and api_url and subject):
        print("postprovision: needs BENCH_API_CLIENT_ID, API_URL, APP_IDENTITY_PRINCIPAL_ID")
        return 2
    tenant = (az_or_none("account", "show") or {}).get("tenantId", "")
    credential = {
        "name": "function-app-login",
        "issuer": f"https://login.microsoftonline.com/{tenant}/v2.0",
        "subject": subject,
        "audiences": ["api://AzureADTokenExchange"],
    }
    commands = [
        [
            "ad",
            "app",
            "update",
            "--id",
            client_id,
            "--web-redirect-uris",
            f"{api_url}/.auth/login/aad/callback",
            "--enable-id-token-issuance",
            "true",
        ],
    ]
    existing = az_or_none("ad", "app", "federated-credential", "list", "--id", client_id) or []
    if not any(c.get("subject") == subject for c in existing):
        commands.append(
            [
                "ad",
                "app",
                "federated-credential",
                "create",
                "--id",
                client_id,
                "--parameters",
                json.dumps(credential),
            ]
        )
    try:
        for command in commands:
            az(*command)
    except AzError as e:
        print(f"postprovision: {e}\nAn owner of the registration must run:")
        for command in commands:
            print("    az " + " ".join(f"'{a}'" if " " in a or "{" in a else a for a in command))
        return 1
    print(
        "postprovision: web sign-in set on the registration (redirect URI, ID tokens, credential)"
    )
    return 0


def cmd_grant_agent_role(args: argparse.Namespace) -> int:
    values = environment()
    client_id = values.get("BENCH_API_CLIENT_ID", "")
    principals = values.get("AGENT_PRINCIPAL_IDS", "") or values.get("AGENT_PRINCIPAL_ID", "")
    if not client_id or not principals:
        print("grant-agent-role: needs BENCH_API_CLIENT_ID and AGENT_PRINCIPAL_IDS (azd sets them)")
        return 2
    status = 0
    for agent in filter(None, principals.split(",")):
        status |= grant_agent_role(client_id, agent)
    return status


def grant_agent_role(client_id: str, agent: str) -> int:
    """With assignment required on the API, a managed identity gets no token without an app
    role (Microsoft Learn, "Restrict your Microsoft Entra app to a set of users")."""
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
    pre = sub.add_parser("preprovision", help="check, then keep elastic pools' capacities")
    pre.add_argument("--facts", help="check recorded facts (JSON) instead of asking Azure")
    sub.add_parser("postprovision", help="the manual registration's roles and web sign-in")
    sub.add_parser("recover-vaults", help="recover this environment's soft-deleted vaults")
    sub.add_parser("grant-agent-role", help=f"give the agents' identities {AGENT_ROLE}")
    args = parser.parse_args(argv)
    commands = {
        "preprovision": cmd_preprovision,
        "postprovision": cmd_postprovision,
        "recover-vaults": cmd_recover_vaults,
        "grant-agent-role": cmd_grant_agent_role,
    }
    return commands.get(args.command, cmd_check)(args)


if __name__ == "__main__":
    sys.exit(main())
