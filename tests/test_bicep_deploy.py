"""`azd up --no-prompt` on an empty subscription (issue 27), read from the templates as
tests/test_bicep.py reads them (pycep, no Azure): no parameter azd would ask for, no pool by
default, the region constrained, the web UI's secretless sign-in, the app registration by
the Microsoft Graph Bicep extension, one identity per pool and Azure Files NFS 4.1
(the private-network option: tests/test_bicep_network.py)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from tests.bicep_tree import (
    BICEP,
    DEPLOY_DOC,
    body,
    main,
    main_module_params,
    module,
    render_cloud_init,
    the,
)

# Values azd sets itself for every environment (azd env new / azd provision).
AZD_OWN = {"AZURE_ENV_NAME", "AZURE_LOCATION", "AZURE_SUBSCRIPTION_ID", "AZURE_PRINCIPAL_ID"}


def parameters_file() -> dict[str, Any]:
    data: dict[str, dict[str, Any]] = json.loads((BICEP / "main.parameters.json").read_text())
    return data["parameters"]


def env_reference(value: Any) -> tuple[str, str | None] | None:
    """`${NAME}` or `${NAME=default}` -> (NAME, default)."""
    m = re.fullmatch(r"\$\{([A-Z0-9_]+)(?:=([^}]*))?\}", value) if isinstance(value, str) else None
    return (m.group(1), m.group(2)) if m else None


def azd_would_prompt(env: dict[str, str]) -> list[str]:
    """azd's rule for a Bicep parameter (Azure/azure-dev#2896, its table): it prompts when
    the parameter has no default and the parameters file leaves it out, or maps it to an
    environment value that is unset or empty (a `${X=default}` fallback counts as set)."""
    asked = []
    mapped = parameters_file()
    for name, param in main()["parameters"].items():
        if param["default"] is not None:
            continue
        entry = mapped.get(name)
        if entry is None:
            asked.append(name)
            continue
        ref = env_reference(entry["value"])
        if ref and not env.get(ref[0]) and ref[1] is None:
            asked.append(name)
    return asked


def documented_env() -> set[str]:
    """The environment values docs/deploy.md's table lists."""
    text = DEPLOY_DOC.read_text()
    table = text.split("<!-- env-table -->", 1)[1].split("<!-- /env-table -->", 1)[0]
    return set(re.findall(r"^\| `([A-Z0-9_]+)` \|", table, re.M))


# ---- 2. azd up without a prompt and without surprises ---------------------------------------


def test_azd_asks_for_nothing_but_its_own_values() -> None:
    """An environment with only what azd sets itself (name, region, subscription) deploys
    with --no-prompt: every other parameter has a default."""
    env = {"AZURE_ENV_NAME": "bench", "AZURE_LOCATION": "swedencentral"}
    assert azd_would_prompt(env) == []
    assert azd_would_prompt({}) == ["environmentName", "location"]


def test_every_environment_value_the_template_reads_is_documented() -> None:
    used = {r[0] for e in parameters_file().values() if (r := env_reference(e["value"]))}
    assert used - AZD_OWN <= documented_env(), used - AZD_OWN - documented_env()
    assert "azd up --no-prompt" in DEPLOY_DOC.read_text()


def test_an_instance_takes_many_http_calls_at_once() -> None:
    """Flex gives a Python app 1 HTTP call per instance unless told otherwise: every agent's
    held barrier call would then take an instance of its own. The app says how many."""
    fn = module("functionapp")
    app = the(fn, "Microsoft.Web/sites")
    scale = app["properties"]["functionAppConfig"]["scaleAndConcurrency"]
    assert scale["triggers"]["http"]["perInstanceConcurrency"] == "httpPerInstanceConcurrency"
    concurrency = fn["parameters"]["httpPerInstanceConcurrency"]["default"]
    instances = fn["parameters"]["maximumInstanceCount"]["default"]
    assert concurrency * instances >= 1000 * 2  # a thousand clients' held calls, twice over


def test_the_windows_password_is_asked_for_only_with_a_windows_pool() -> None:
    params = main()["parameters"]
    password = params["windowsAdminPassword"]
    assert password["default"] == "" and {"type": "secure"} in password["decorators"]
    # Used by the Windows pool only, which refuses an empty one before any VM exists.
    windows = module("agentpool-windows")["parameters"]["adminPassword"]
    (minimum,) = [d["argument"] for d in windows["decorators"] if d["type"] == "min_length"]
    assert minimum >= 12
    decl = main()["modules"]["windowsAgents"]
    assert decl["config"]["condition"] == "deployWindowsPool"
    empty = {"function": {"type": "empty", "parameters": {"item_to_test": "windowsPoolJson"}}}
    assert main()["variables"]["deployWindowsPool"]["value"] == {
        "operator": {"type": "not", "operands": {"bool_value": empty}}
    }


def test_no_pool_is_deployed_by_default_and_the_samples_are_an_example() -> None:
    params = main()["parameters"]
    assert params["poolsJson"]["default"] == "[]"
    assert params["targetsJson"]["default"] == "[]"
    assert params["windowsPoolJson"]["default"] == ""
    mapped = parameters_file()
    assert env_reference(mapped["poolsJson"]["value"]) == ("BENCH_POOLS_JSON", None)
    # No literal pool or address in the parameters file; the samples live in examples/.
    assert "10.0.0.4" not in (BICEP / "main.parameters.json").read_text()
    samples = json.loads((BICEP / "examples" / "pools.json").read_text())
    assert {p["name"] for p in samples} == {"anf", "files", "nfs"}
    targets = json.loads((BICEP / "examples" / "targets.json").read_text())
    for t in targets:
        (pool,) = [p for p in samples if p["name"] == t["pool"]]
        assert t["alias"] in {m["alias"] for m in pool["mounts"]}


def test_the_region_is_one_with_flex_consumption_and_azd_knows_it_for_a_location() -> None:
    location = main()["parameters"]["location"]
    (allowed,) = [d["argument"] for d in location["decorators"] if d["type"] == "allowed"]
    # Microsoft's Flex Consumption azd samples' list (remote-mcp-functions-python).
    assert {"swedencentral", "eastus", "westeurope", "uksouth", "australiaeast"} <= set(allowed)
    assert "westindia" not in allowed and len(allowed) == len(set(allowed))
    (meta,) = [d["argument"] for d in location["decorators"] if d["type"] == "metadata"]
    assert meta == {"azd": {"type": "location"}}


# ---- 3. the web UI signs in, secretless --------------------------------------------------


def test_sign_in_uses_the_apps_managed_identity_as_its_client_credential() -> None:
    tree = module("functionapp")
    aad = body(tree["resources"]["auth"])["properties"]["identityProviders"]["azureActiveDirectory"]
    registration = aad["registration"]
    assert registration["clientSecretSettingName"] == "OVERRIDE_USE_MI_FIC_ASSERTION_CLIENTID"
    settings = {
        s["name"]: s["value"]
        for s in body(tree["resources"]["app"])["properties"]["siteConfig"]["appSettings"]
    }
    # The app's identity's client id, never a secret (Microsoft Learn, App Service: "Use a
    # managed identity instead of a secret").
    assert settings["OVERRIDE_USE_MI_FIC_ASSERTION_CLIENTID"] == "appIdentityClientId"
    assert aad["validation"]["allowedAudiences"] == ["apiClientId", "apiIdentifierUri"]
    # The API's own client is admitted: a signed-in browser's tokens carry it as azp.
    allowed = main_module_params("functionApp")["allowedClientApplications"]
    assert allowed["function"]["parameters"]["arg_1"] == ["apiAppClientId"]


def test_the_registration_trusts_the_apps_identity_and_has_a_web_sign_in() -> None:
    tree = module("entra-app")
    fic = body(tree["resources"]["loginCredential"])
    assert fic["subject"] == "appIdentityPrincipalId"
    assert fic["audiences"] == ["api://AzureADTokenExchange"]
    assert fic["issuer"] == "${environment().authentication.loginEndpoint}${tenant().tenantId}/v2.0"
    web = body(tree["resources"]["api"])["web"]
    assert web["redirectUris"] == ["https://${appHostName}/.auth/login/aad/callback"]
    assert web["implicitGrantSettings"] == {"enableIdTokenIssuance": True}
    assert (
        main_module_params("entraApp")["appIdentityPrincipalId"]["operator"]["operands"][
            "operand_1"
        ]
        == "identities"
    )


# ---- 4. the app registration in the template --------------------------------------------


def test_the_graph_extension_creates_the_registration_when_none_is_given() -> None:
    config = json.loads((BICEP / "bicepconfig.json").read_text())
    assert config["extensions"]["microsoftGraphV1"].startswith(
        "br:mcr.microsoft.com/bicep/extensions/microsoftgraph/v1.0:"
    )
    tree = module("entra-app")
    assert "microsoftGraphV1" in tree["extensions"]
    assert main()["modules"]["entraApp"]["config"]["condition"] == "createApiApp"
    assert main()["modules"]["entraPreauthorize"]["config"]["condition"] == "createApiApp"
    assert main()["parameters"]["apiClientId"]["default"] == ""  # the manual path gives one
    manifest = json.loads((BICEP / "entra" / "api-app.json").read_text())
    app = body(tree["resources"]["api"])
    # The scope and app roles of bicep/entra/api-app.json, the manual path's own file.
    assert app["api"] == {
        "operator": {
            "type": "property_accessor",
            "operands": {"operand_1": "manifest", "operand_2": "api"},
        }
    }
    loaded = tree["variables"]["manifest"]["value"]["function"]
    assert (loaded["type"], loaded["parameters"]["file_path"]) == (
        "load_json_content",
        "../entra/api-app.json",
    )
    sp = body(tree["resources"]["apiPrincipal"])
    assert sp["appRoleAssignmentRequired"] is True
    roles = {r["value"]: r["id"] for r in manifest["appRoles"]}
    assert "Bench.Agent" in roles and "Bench.Admin" in roles
    agents = body(tree["resources"]["agentRoles"])
    assert agents["appRoleId"]["operator"]["operands"] == {
        "operand_1": "roleIds",
        "operand_2": "Bench.Agent",
    }
    admin = body(tree["resources"]["adminRole"])
    assert admin["appRoleId"]["operator"]["operands"]["operand_2"] == "Bench.Admin"
    assert main_module_params("entraApp")["adminPrincipalId"] == "deployerPrincipalId"
    assert tree["resources"]["agentRoles"]["config"]["loop_type"]["detail"]["array_name"] == (
        "agentPrincipalIds"
    )
    # After Cosmos DB (minutes): new identities' principals must have replicated.
    assert "cosmos" in json.dumps(body(main()["modules"]["entraApp"])["dependsOn"])


def test_the_preauthorization_repeats_the_application_and_names_the_scope() -> None:
    first = body(module("entra-app")["resources"]["api"])
    second = body(module("entra-preauthorize")["resources"]["api"])
    for key in ("uniqueName", "displayName", "identifierUris", "appRoles", "web", "signInAudience"):
        assert first[key] == second[key], key
    assert first["identifierUris"] == ["identifierUri"]
    for name in ("entra-app", "entra-preauthorize"):
        uri = module(name)["variables"]["identifierUri"]["value"]
        # api://<tenant id>/<string>: a secure app ID URI form needing no appId.
        assert uri == "api://${tenant().tenantId}/benchsvc-${token}"
    pre = json.dumps(second["api"])
    assert "preAuthorizedApplications" in pre and "scopeId" in pre
    assert body(main()["modules"]["entraPreauthorize"])["dependsOn"] == ["entraApp"]
    assert main_module_params("entraPreauthorize")["clientApplications"] == "apiClientApplications"


# ---- 5. one identity per pool; Azure Files NFS 4.1 ----------------------------------------


def test_each_pool_gets_its_own_identity() -> None:
    tree = module("identities")
    agents = tree["resources"]["agents"]
    assert agents["config"]["loop_type"]["detail"] == {"item_name": "pool", "array_name": "pools"}
    assert body(agents)["name"] == "id-bench-agent-${pool}-${token}"
    pick = {
        "function": {
            "type": "index_of",
            "parameters": {
                "string_to_search": "allPools",
                "string_to_find": {
                    "operator": {
                        "type": "property_accessor",
                        "operands": {"operand_1": "pool", "operand_2": "name"},
                    }
                },
            },
        }
    }
    for name in ("linuxPools", "elasticAgentPools"):
        params = body(main()["modules"][name])["params"]
        # identities.outputs.agents[indexOf(allPools, pool.name)].id: the pool's own.
        assert json.dumps(pick) in json.dumps(params["agentIdentityId"])
        assert json.dumps(pick) in json.dumps(params["agentIdentityClientId"])
    windows = json.dumps(main_module_params("windowsAgents")["agentIdentityId"])
    assert "windowsPool" in windows


AZURE_FILES_NFS = {
    "alias": "nfs1",
    "kind": "nfs",
    "source": "stnfsabc.file.core.windows.net:/stnfsabc/bench",
}


def mount_unit(text: str, alias: str) -> dict[str, str]:
    data = yaml.safe_load(text)
    (unit,) = [f for f in data["write_files"] if f["path"].endswith(f"mnt-bench-{alias}.mount")]
    return dict(line.split("=", 1) for line in unit["content"].splitlines() if "=" in line)


def test_an_azure_files_nfs_share_mounts_as_nfs_4_1_with_four_connections() -> None:
    text = render_cloud_init([AZURE_FILES_NFS])
    unit = mount_unit(text, "nfs1")
    assert unit["What"] == AZURE_FILES_NFS["source"]
    options = unit["Options"].split(",")
    # Microsoft's mount: vers=4,minorversion=1 (4.1), sec=sys, nconnect=4.
    assert options[:4] == ["vers=4.1", "sec=sys", "nconnect=4", "rsize=1048576"]
    assert "wsize=1048576" in options and "hard" in options
    agent = json.loads(
        next(
            f
            for f in yaml.safe_load(text)["write_files"]
            if f["path"] == "/etc/benchsvc/agent.json"
        )["content"]
    )
    assert agent["mounts"]["nfs1"]["fstype"] == "nfs4"  # as /proc/self/mountinfo shows 4.1
    # An ANF volume keeps its defaults: NFSv3, nconnect 8.
    anf = mount_unit(render_cloud_init([{**AZURE_FILES_NFS, "source": "10.0.0.4:/vol1"}]), "nfs1")
    assert anf["Options"].startswith("vers=3,nconnect=8,")


def test_an_azure_files_share_refuses_any_other_nfs_version() -> None:
    with pytest.raises(KeyError, match="3"):
        render_cloud_init([{**AZURE_FILES_NFS, "nfs_version": "3"}])


def test_the_template_can_create_an_nfs_share_behind_a_private_endpoint() -> None:
    tree = module("files-nfs")
    account = the(tree, "Microsoft.Storage/storageAccounts")
    assert (account["kind"], account["sku"]["name"]) == ("FileStorage", "Premium_LRS")
    assert account["properties"]["publicNetworkAccess"] == "Disabled"
    assert account["properties"]["allowSharedKeyAccess"] is False
    share = the(tree, "Microsoft.Storage/storageAccounts/fileServices/shares")
    assert share["properties"]["enabledProtocols"] == "NFS"
    assert main()["modules"]["filesNfs"]["config"]["condition"] == {
        "operator": {
            "type": "and",
            "operands": {
                "operand_1": "vnetEnabled",
                "operand_2": {
                    "operator": {
                        "type": "greater_than",
                        "operands": {"operand_1": "nfsShareGiB", "operand_2": 0},
                    }
                },
            },
        }
    }
    assert tree["outputs"]["source"]["value"].endswith("${share.name}")
