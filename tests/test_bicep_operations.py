"""The operator's side of the deployment, asserted on the Bicep (issue 31): OpenTelemetry to
Application Insights, the alert rules on the metrics the app exports, retention (Cosmos DB
TTLs, Blob lifecycle management) with the same values the app is given, and continuous
backup with its tier as a parameter. Nothing is deployed from here (no Azure)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from adapters.blob import CONTAINER, RAW
from adapters.config import Settings
from core.retention import DAY_S, PER_ITEM_TTL, Retention
from core.runs.timer import TIMERS
from functions import telemetry
from tests.bicep_tree import BICEP, app_settings, body, module, parse, resources_of_type

ROOT = Path(__file__).resolve().parent.parent


def main_params(name: str) -> dict[str, Any]:
    params: dict[str, Any] = body(parse(BICEP / "main.bicep")["modules"][name])["params"]
    return params


def defaults() -> dict[str, Any]:
    return {n: p["default"] for n, p in parse(BICEP / "main.bicep")["parameters"].items()}


def test_cosmos_db_has_continuous_backup_with_its_tier_a_parameter() -> None:
    tree = module("cosmos")
    account = body(tree["resources"]["account"])["properties"]
    assert account["backupPolicy"] == {
        "type": "Continuous",
        "continuousModeProperties": {"tier": "continuousBackupTier"},
    }
    tier = tree["parameters"]["continuousBackupTier"]
    assert tier["default"] == "Continuous7Days"
    allowed = parse(BICEP / "main.bicep")["parameters"]["cosmosBackupTier"]
    assert main_params("cosmos")["continuousBackupTier"] == "cosmosBackupTier"
    assert allowed["default"] == "Continuous7Days"
    decorators = json.dumps(allowed["decorators"])
    assert "Continuous7Days" in decorators and "Continuous30Days" in decorators
    mapped = json.loads((BICEP / "main.parameters.json").read_text())["parameters"]
    assert mapped["cosmosBackupTier"]["value"] == "${BENCH_COSMOS_BACKUP_TIER=Continuous7Days}"


def test_ephemeral_documents_expire_with_the_ttl_the_app_is_told() -> None:
    """Replay guards and agent records expire in Cosmos DB; the app gets the same values
    (the local stack's timer enforces them, adapters/retention.py)."""
    cosmos, app = main_params("cosmos"), main_params("functionApp")
    assert cosmos["activityTtlSeconds"] == app["activityTtlSeconds"] == "activityTtlSeconds"
    agent_ttl = {
        "operator": {
            "type": "multiply",
            "operands": {"operand_1": "agentRecordTtlDays", "operand_2": 86400},
        }
    }
    assert cosmos["agentTtlSeconds"] == app["agentTtlSeconds"] == agent_ttl
    assert cosmos["liveTtlSeconds"] == app["liveTtlSeconds"] == "liveTtlSeconds"
    settings = app_settings()
    assert (
        settings["BENCH_ACTIVITY_TTL_S"]["function"]["parameters"]["value_to_convert"]
        == "activityTtlSeconds"
    )
    assert (
        settings["BENCH_AGENT_TTL_S"]["function"]["parameters"]["value_to_convert"]
        == "agentTtlSeconds"
    )
    # Finished deliveries (a Teams run thread once its result is posted) carry their own ttl,
    # in a container whose TTL is on with no default (-1): the app is told the seconds.
    delivery_ttl = {
        "operator": {
            "type": "multiply",
            "operands": {"operand_1": "finishedDeliveryTtlDays", "operand_2": 86400},
        }
    }
    assert app["deliveryTtlSeconds"] == delivery_ttl
    assert (
        settings["BENCH_DELIVERY_TTL_S"]["function"]["parameters"]["value_to_convert"]
        == "deliveryTtlSeconds"
    )
    d = defaults()
    rules = Retention()
    assert d["activityTtlSeconds"] == rules.activity_ttl_s
    assert d["agentRecordTtlDays"] * 86400 == rules.agent_ttl_s
    assert d["liveTtlSeconds"] == rules.live_ttl_s
    assert (
        settings["BENCH_LIVE_TTL_S"]["function"]["parameters"]["value_to_convert"]
        == "liveTtlSeconds"
    )
    assert d["finishedDeliveryTtlDays"] * DAY_S == rules.delivery_ttl_s
    # Nothing else expires: runs, results, series, schedules stay while their owner does.
    tree = module("cosmos")
    with_ttl = {
        body(r)["name"]: body(r)["properties"]["resource"]["defaultTtl"]
        for r in tree["resources"].values()
        if "defaultTtl" in json.dumps(body(r))
    }
    assert set(with_ttl) == set(rules.ttls()) | PER_ITEM_TTL
    minus_one = {"operator": {"type": "minus", "operands": {"integer_value": 1}}}  # pycep's -1
    assert all(with_ttl[name] == minus_one for name in PER_ITEM_TTL)


def test_raw_artifacts_cool_then_go_by_the_app_s_own_prefix_and_values() -> None:
    (policy,) = resources_of_type(
        module("storage"), "Microsoft.Storage/storageAccounts/managementPolicies"
    ).values()
    (rule,) = body(policy)["properties"]["policy"]["rules"]
    assert rule["enabled"] is True
    assert rule["definition"]["filters"] == {
        "blobTypes": ["blockBlob"],
        "prefixMatch": [f"{CONTAINER}/{RAW}"],  # adapters/blob.py writes raw output there
    }
    assert rule["definition"]["actions"] == {
        "baseBlob": {
            "tierToCool": {"daysAfterModificationGreaterThan": "rawCoolAfterDays"},
            "delete": {"daysAfterModificationGreaterThan": "rawDeleteAfterDays"},
        }
    }
    storage, app = main_params("storage"), main_params("functionApp")
    for name in ("rawCoolAfterDays", "rawDeleteAfterDays"):
        assert storage[name] == app[name] == name
    settings = app_settings()
    assert (
        settings["BENCH_RAW_COOL_DAYS"]["function"]["parameters"]["value_to_convert"]
        == "rawCoolAfterDays"
    )
    assert (
        settings["BENCH_RAW_DELETE_DAYS"]["function"]["parameters"]["value_to_convert"]
        == "rawDeleteAfterDays"
    )
    d = defaults()
    env = {"BENCH_QUEUE_URI": "q", "BENCH_BLOB_URI": "b", "BENCH_COSMOS_ENDPOINT": "c"}
    env |= {
        "BENCH_RAW_COOL_DAYS": str(d["rawCoolAfterDays"]),
        "BENCH_RAW_DELETE_DAYS": str(d["rawDeleteAfterDays"]),
    }
    assert Settings.from_env(env).retention == Retention()


def _query(tree: dict[str, Any], rule: dict[str, Any], stale_s: int) -> str:
    query = rule["properties"]["criteria"]["allOf"][0]["query"]
    if isinstance(query, dict):  # format(timerQuery, timerStaleSeconds)
        params = query["function"]["parameters"]
        text = str(tree["variables"][params["format_string"]]["value"])
        assert params["arg_1"] == "timerStaleSeconds"
        return text.replace("{0}", str(stale_s))
    return str(tree["variables"][query]["value"])


def test_alert_rules_for_a_stale_timer_and_for_poison_messages() -> None:
    tree = module("alerts")
    rules = {
        body(r)["properties"]["displayName"]: body(r)
        for r in resources_of_type(tree, "Microsoft.Insights/scheduledQueryRules").values()
    }
    assert set(rules) == {"bench: a timer is stale", "bench: messages in a poison queue"}
    for rule in rules.values():
        props = rule["properties"]
        assert rule["kind"] == "LogAlert" and props["enabled"] is True
        assert props["scopes"] == ["appInsightsId"]  # where the app's metrics land
        criterion = props["criteria"]["allOf"][0]
        assert (criterion["timeAggregation"], criterion["operator"], criterion["threshold"]) == (
            "Count",
            "GreaterThan",
            0,
        )
        assert props["actions"] == {"actionGroups": "actions"}
    assert (
        main_params("alerts")["appInsightsId"]["operator"]["operands"]["operand_1"] == "monitoring"
    )

    stale = _query(tree, rules["bench: a timer is stale"], 300)
    assert f'name == "{telemetry.TICK_AGE}"' in stale
    assert re.search(r'datatable\(timer: string\)\["runs", "schedules"\]', stale)
    assert tuple(re.findall(r'"(\w+)"', stale.split("datatable")[1])[:2]) == TIMERS
    assert "coalesce(age_s, 1.0e9)" in stale  # a timer nobody reported is stale too
    assert "| where age_s > 300" in stale
    assert tree["parameters"]["timerStaleSeconds"]["default"] == 300
    # /api/health judges the timers by the same figure (BENCH_TIMER_STALE_S, issue 24.1).
    assert main_params("alerts")["timerStaleSeconds"] == "timerStaleSeconds"
    assert main_params("functionApp")["timerStaleSeconds"] == "timerStaleSeconds"
    stale_setting = app_settings()["BENCH_TIMER_STALE_S"]["function"]["parameters"]
    assert stale_setting["value_to_convert"] == "timerStaleSeconds"
    assert defaults()["timerStaleSeconds"] == Settings.model_fields["timer_stale_s"].default

    poison = _query(tree, rules["bench: messages in a poison queue"], 300)
    assert f'name == "{telemetry.QUEUE_MESSAGES}"' in poison
    assert 'customDimensions["queue"]) == "poison"' in poison
    assert "| where messages > 0" in poison
    # Notified by email when addresses are given (azd: BENCH_ALERT_EMAILS).
    group = body(tree["resources"]["actionGroup"])
    assert tree["resources"]["actionGroup"]["config"]["condition"]["operator"]["type"] == "not"
    assert (
        group["properties"]["emailReceivers"]["loop_type"]["detail"]["array_name"] == "alertEmails"
    )


def test_the_function_app_exports_opentelemetry_to_application_insights() -> None:
    host = json.loads((ROOT / "host.json").read_text())
    assert host["telemetryMode"] == "OpenTelemetry"
    settings = app_settings()
    assert settings["PYTHON_ENABLE_OPENTELEMETRY"] == "true"
    assert settings["APPLICATIONINSIGHTS_CONNECTION_STRING"] == "appInsightsConnectionString"
    auth = settings["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"]
    assert auth.startswith("Authorization=AAD;ClientId=")  # Entra ID ingestion, no key
    pins = (ROOT / "requirements.txt").read_text().split()
    assert "azure-monitor-opentelemetry==1.8.11" in pins
