"""The Function App's settings (bicep/, read as tests/test_bicep.py reads it) against the code:
exactly the settings it reads, their values, and the Teams bot's identity."""

from __future__ import annotations

from adapters.config import SETTING_NAMES
from tests.bicep_tree import BICEP, SECRETISH, Node, app_settings, body, module, parse


def test_service_settings_are_exactly_those_the_code_reads() -> None:
    names = {n for n in app_settings() if n.startswith("BENCH_") or n == "AZURE_CLIENT_ID"}
    assert names == set(SETTING_NAMES)


def test_service_settings_values() -> None:
    s = app_settings()
    assert s["BENCH_LOCAL_EMULATORS"] == "0"
    assert s["BENCH_LOCAL_TIMER_SECONDS"] == "0"
    assert s["BENCH_LOCAL_TIMER_LEASE_S"] == "0"
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
