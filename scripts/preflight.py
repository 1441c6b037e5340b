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
