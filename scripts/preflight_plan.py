"""The preflight's checks of what is about to be deployed (pure functions of the facts, as in
preflight_checks): the pools and targets in the azd environment, the values a pool needs,
placeholder addresses, the region, the vCPU quota, and which path makes the API's app
registration."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any

from preflight_checks import ROOT, Facts, Json, Problem

MAIN = ROOT / "bicep" / "main.bicep"
EXAMPLES = ROOT / "bicep" / "examples" / "pools.json"
# Directory roles that may create app registrations whatever the tenant's user setting.
APP_CREATORS = {
    "Global Administrator",
    "Application Administrator",
    "Cloud Application Administrator",
    "Application Developer",
}


def _json(f: Facts, name: str, default: Any) -> Any:
    text = f.env.get(name, "").strip()
    if not text:
        return default
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{name} is not JSON: {e}") from None


def plan(f: Facts) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(Linux pools, Windows pool or None) from the environment; ValueError if malformed."""
    pools = _json(f, "BENCH_POOLS_JSON", [])
    windows = _json(f, "BENCH_WINDOWS_POOL_JSON", None)
    if not isinstance(pools, list) or not all(isinstance(p, dict) for p in pools):
        raise ValueError("BENCH_POOLS_JSON must be a JSON array of pools")
    if windows is not None and not isinstance(windows, dict):
        raise ValueError("BENCH_WINDOWS_POOL_JSON must be a JSON object")
    return pools, windows


def vnet_enabled(f: Facts) -> bool:
    return f.env.get("BENCH_VNET_ENABLED", "false").strip().lower() == "true"


def check_plan(f: Facts) -> list[Problem]:
    """Malformed JSON, and the values a pool needs that have no use without one."""
    try:
        pools, windows = plan(f)
        _json(f, "BENCH_TARGETS_JSON", [])
    except ValueError as e:
        return [Problem(str(e), ['docs/deploy.md, "Agent pools and volumes"'])]
    problems = []
    needed = []
    if pools or windows:
        needed.append("BENCH_AGENT_PACKAGE_URL")
    if pools:
        needed.append("BENCH_AGENT_SSH_PUBLIC_KEY")
        if not vnet_enabled(f):
            needed.append("BENCH_AGENT_SUBNET_ID")
    for name in needed:
        if not f.env.get(name):
            problems.append(
                Problem(
                    f"{name} is not set, and a pool is deployed (BENCH_POOLS_JSON or "
                    "BENCH_WINDOWS_POOL_JSON)",
                    [f"azd env set {name} <value>   # docs/deploy.md, step 5"],
                )
            )
    if windows is not None and len(f.env.get("BENCH_WINDOWS_ADMIN_PASSWORD", "")) < 12:
        problems.append(
            Problem(
                "the Windows pool needs BENCH_WINDOWS_ADMIN_PASSWORD (12 characters at least)",
                ['azd env set BENCH_WINDOWS_ADMIN_PASSWORD "$(openssl rand -base64 24)"'],
            )
        )
    gib = int(f.env.get("BENCH_NFS_SHARE_GIB", "0") or 0)
    if gib and (gib < 100 or not vnet_enabled(f)):
        problems.append(
            Problem(
                f"BENCH_NFS_SHARE_GIB={gib}: the Azure Files NFS share needs "
                "BENCH_VNET_ENABLED=true (private endpoint) and 100 GiB at least",
                ["azd env set BENCH_VNET_ENABLED true", "azd env set BENCH_NFS_SHARE_GIB 100"],
            )
        )
    return problems


def _placeholders() -> set[str]:
    samples = json.loads(EXAMPLES.read_text())
    return {m["source"] for p in samples for m in p.get("mounts", [])}


def check_mounts(f: Facts) -> list[Problem]:
    """The example file's addresses never reach VMs that would mount nothing, and an Azure
    Files NFS share is mounted as it can be (NFS 4.1)."""
    try:
        pools, _ = plan(f)
    except ValueError:
        return []  # reported by check_plan
    placeholders = _placeholders()
    problems = []
    for p in pools:
        for m in p.get("mounts", []):
            source = str(m.get("source", ""))
            where = f"pool {p.get('name')}, mount {m.get('alias')}"
            if source in placeholders or "<" in source or ".invalid" in source:
                problems.append(
                    Problem(
                        f"{where}: {source!r} is a placeholder from bicep/examples/pools.json, "
                        "not a volume: its VMs would run and mount nothing",
                        ["put your volume's address in BENCH_POOLS_JSON (azd env set)"],
                    )
                )
            on_files = ".file.core." in source and ":/" in source
            if on_files and str(m.get("nfs_version", "4.1")) != "4.1":
                problems.append(
                    Problem(
                        f"{where}: Azure Files NFS shares speak NFS 4.1 only, not "
                        f"{m.get('nfs_version')}",
                        ['use "nfs_version": "4.1" (or leave it out)'],
                    )
                )
            if m.get("kind") == "smb":
                problems += _smb_secret(f, where, str(m.get("smb_secret_name", "")))
    return problems


def _smb_secret(f: Facts, where: str, secret: str) -> list[Problem]:
    """Each pool's identity is granted its own secrets, which must exist to be a scope."""
    vault = f.env.get("AGENT_KEY_VAULT_NAME", "")
    if not vault:
        return [
            Problem(
                f"{where}: its SMB credentials ({secret}) go in the agent vault, which the "
                "first azd up creates",
                [
                    "azd up without this pool first, then set the secret (docs/deploy.md, "
                    "step 6) and add the pool",
                ],
            )
        ]
    if f.agent_vault_secrets is not None and secret not in f.agent_vault_secrets:
        return [
            Problem(
                f"{where}: secret {secret} is not in {vault}: the pool's identity is granted "
                "its own secrets, so each must exist first",
                [f"az keyvault secret set --vault-name {vault} --name {secret} --file ./{secret}"],
            )
        ]
    return []


def allowed_locations() -> list[str]:
    """The template's own @allowed list for `location` (bicep/main.bicep)."""
    text = MAIN.read_text()
    block = text.split("@allowed([", 1)[1].split("])", 1)[0]
    return re.findall(r"'([a-z0-9]+)'", block)


def check_location(f: Facts) -> list[Problem]:
    location = f.env.get("AZURE_LOCATION", "")
    if not location:
        return []  # check_env
    live = {str(x.get("name", "")).lower().replace(" ", "") for x in f.flex_locations or []}
    if location not in allowed_locations() or (
        f.flex_locations is not None and location not in live
    ):
        offered = sorted(live) if f.flex_locations is not None else allowed_locations()
        return [
            Problem(
                f"{location} does not offer Flex Consumption, which the API runs on",
                [
                    "az functionapp list-flexconsumption-locations -o table",
                    "azd env set AZURE_LOCATION <one of them>   # e.g. " + ", ".join(offered[:4]),
                ],
            )
        ]
    return []


def _vcpus(sku: Json) -> int:
    caps = {c.get("name"): c.get("value") for c in sku.get("capabilities") or []}
    return int(caps.get("vCPUs", 0))


def check_quota(f: Facts) -> list[Problem]:
    """Enough regional and per-family vCPUs for every pool at its largest."""
    if f.vm_usage is None or f.vm_skus is None:
        return []
    try:
        pools, windows = plan(f)
    except ValueError:
        return []
    sizes = {s["name"]: s for s in f.vm_skus}
    wanted: dict[str, int] = defaultdict(int)
    total = 0
    for p in [*pools, *([windows] if windows else [])]:
        count = int(p.get("maxCount", p.get("instanceCount", 0)))
        sku = sizes.get(p.get("vmSize", ""))
        if sku is None:
            continue
        wanted[sku["family"]] += count * _vcpus(sku)
        total += count * _vcpus(sku)
    usage = {u["name"]["value"]: u for u in f.vm_usage}
    problems = []
    for family, need in [*wanted.items(), ("cores", total)]:
        u = usage.get(family)
        if u is None or not need:
            continue
        free = int(u["limit"]) - int(u["currentValue"])
        if need > free:
            name = u["name"].get("localizedValue", family)
            problems.append(
                Problem(
                    f"{name}: the pools need {need} vCPUs at most, {free} are free "
                    f"(limit {u['limit']}, in use {u['currentValue']})",
                    [
                        f"az vm list-usage --location {f.env.get('AZURE_LOCATION')} -o table",
                        "request more: Azure portal, Quotas, Compute (docs/deploy.md, step 2)",
                        "or make the pools smaller (instanceCount, maxCount)",
                    ],
                )
            )
    return problems


def registration_path(f: Facts) -> str:
    return "manual" if f.env.get("BENCH_API_CLIENT_ID") else "template"


def check_registration_path(f: Facts) -> list[Problem]:
    """The template path creates an app registration as the deploying user: the tenant must
    let them, and accept an api://<tenant id>/<name> identifier."""
    if registration_path(f) == "manual" or f.account is None:
        return []
    manual = [
        "an administrator creates it (docs/deploy.md, step 3b), then:",
        "azd env set BENCH_API_CLIENT_ID <its client id>",
    ]
    problems = []
    roles = {r.get("displayName") for r in f.directory_roles or []}
    allowed = ((f.authorization_policy or {}).get("defaultUserRolePermissions") or {}).get(
        "allowedToCreateApps"
    )
    if f.authorization_policy is not None and allowed is False and not roles & APP_CREATORS:
        problems.append(
            Problem(
                "this tenant does not let you create app registrations (users may not, and "
                "you hold none of " + ", ".join(sorted(APP_CREATORS)) + "): the template "
                "cannot create the API's",
                manual,
            )
        )
    restrictions = ((f.app_management_policy or {}).get("applicationRestrictions") or {}).get(
        "identifierUris"
    ) or {}
    blocked = (restrictions.get("nonDefaultUriAddition") or {}).get("state") == "enabled"
    if blocked:
        problems.append(
            Problem(
                "this tenant's app management policy allows only api://<appId> identifier "
                "URIs, which a template cannot know in advance",
                manual,
            )
        )
    return problems


def notes_of(f: Facts) -> list[str]:
    """What the preflight tells even when all is well."""
    path = registration_path(f)
    if path == "manual":
        how = f"manual: the existing registration {f.env.get('BENCH_API_CLIENT_ID')}"
    else:
        how = "template: created by bicep/modules/entra-app.bicep (Microsoft Graph Bicep extension)"
    return [f"API app registration: {how}"]


def elastic_capacities(f: Facts) -> dict[str, int]:
    """Each elastic pool's scale set and its current capacity, which a redeploy keeps."""
    try:
        pools, _ = plan(f)
    except ValueError:
        return {}
    elastic = {p.get("name") for p in pools if "maxCount" in p}
    found = {}
    for vmss in f.scale_sets or []:
        if (vmss.get("tags") or {}).get("bench-pool") in elastic:
            found[str(vmss["name"])] = int((vmss.get("sku") or {}).get("capacity", 0))
    return found


PLAN_CHECKS = (check_plan, check_mounts, check_location, check_quota, check_registration_path)
