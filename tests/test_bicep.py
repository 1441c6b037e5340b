"""Static checks of the Azure deployment (bicep/): every file parses and is tagged, and no
secret is anywhere (no key or connection string, secure parameters without defaults, secret
settings as Key Vault references). The identities, role assignments, app settings and the
agent's cloud-init have their files (tests/test_bicep_*.py).

Self-contained: reads the files under bicep/ with pycep (the parser Checkov uses,
tests/bicep_tree.py) and never touches the network or Azure. Where a check needs a value the
template computes (the cloud-init), it evaluates the Bicep expressions themselves with the
small evaluator there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.bicep_tree import (
    BICEP,
    BICEP_FILES,
    MODULES,
    ROOT,
    SECRETISH,
    app_settings,
    body,
    module,
    parse,
)

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
