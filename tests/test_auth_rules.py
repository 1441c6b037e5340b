"""Who may do what, without a server: App Service Authentication's principal header and the
role it gives, the default role, settings that refuse bad keys, roles and targets, the role
limits on a run's steps and repetitions, and an agent's identity from its credential (through
the API: tests/test_auth.py)."""

from __future__ import annotations

from typing import Any

import pytest

from adapters.config import ConfigError, Settings
from core.models import RunRequest, Workload
from core.runs.guardrails import Caller, TargetInfo, check_run
from core.runs.plan import plan_steps
from functions.auth import NoAppRole, Unauthorized, resolve_caller
from tests.auth_headers import principal


def settings(**env: str) -> Settings:
    return Settings.from_env(
        {
            "BENCH_QUEUE_URI": "https://q",
            "BENCH_BLOB_URI": "https://b",
            "BENCH_COSMOS_ENDPOINT": "https://c",
            **env,
        }
    )


def test_easyauth_principal_gives_role_name_and_agents() -> None:
    s = settings(
        BENCH_TRUST_EASYAUTH="1", BENCH_AGENT_PRINCIPALS="oid-agent", BENCH_DEFAULT_ROLE="reader"
    )
    headers = {
        "x-ms-client-principal": principal(
            [("roles", "Bench.Runner"), ("roles", "Bench.Engineer")]
        ),
        "x-ms-client-principal-name": "ada@contoso.com",
        "x-ms-client-principal-id": "oid-ada",
        "x-bench-door": "pipeline",
    }
    assert resolve_caller(headers, s) == Caller("ada@contoso.com", "engineer", "pipeline")
    no_roles = {"x-ms-client-principal": principal([]), "x-ms-client-principal-id": "oid-bob"}
    assert resolve_caller(no_roles, s).role == "reader"
    agent = {"x-ms-client-principal": principal([]), "x-ms-client-principal-id": "oid-agent"}
    assert resolve_caller(agent, s).is_agent
    with pytest.raises(Unauthorized):
        resolve_caller({}, s)
    with pytest.raises(Unauthorized):
        resolve_caller({"x-ms-client-principal": "not base64 json"}, s)
    # Locally, with nothing configured, the API is open.
    assert resolve_caller({}, settings()).role == "admin"


def test_a_signed_in_caller_without_an_app_role_has_no_access_by_default() -> None:
    s = settings(BENCH_TRUST_EASYAUTH="1", BENCH_AGENT_PRINCIPALS="oid-agent")
    assert s.default_role is None
    anyone = {"x-ms-client-principal": principal([]), "x-ms-client-principal-id": "oid-eve"}
    with pytest.raises(NoAppRole, match=r"no Bench\.\* app role") as e:
        resolve_caller(anyone, s)
    assert (e.value.status, e.value.field) == (403, "(caller)")
    # An app role other than Bench.* (or a role unknown to the API) is no role either.
    other = {**anyone, "x-ms-client-principal": principal([("roles", "Bench.Agent")])}
    with pytest.raises(NoAppRole):
        resolve_caller(other, s)
    reader = {**anyone, "x-ms-client-principal": principal([("roles", "Bench.Reader")])}
    assert resolve_caller(reader, s).role == "reader"
    agent = {"x-ms-client-principal": principal([]), "x-ms-client-principal-id": "oid-agent"}
    assert resolve_caller(agent, s).is_agent
    # Still configurable: "none" and "" also mean no role; a role name is given to everyone.
    for none in ("none", ""):
        assert settings(BENCH_TRUST_EASYAUTH="1", BENCH_DEFAULT_ROLE=none).default_role is None
    runner = settings(BENCH_TRUST_EASYAUTH="1", BENCH_DEFAULT_ROLE="runner")
    assert resolve_caller(anyone, runner).role == "runner"
    with pytest.raises(ConfigError, match="BENCH_DEFAULT_ROLE"):
        settings(BENCH_DEFAULT_ROLE="root")


def test_an_unresolved_key_vault_reference_is_no_secret() -> None:
    ref = "@Microsoft.KeyVault(VaultName=kv-bench;SecretName=bot-secret)"
    s = settings(BENCH_BOT_SECRET=ref, BENCH_TEAMS_BOT_SECRET=ref, BENCH_WEBHOOK_SECRET=ref)
    assert (s.bot_secret, s.teams_bot_secret, s.webhook_secret) == (None, None, None)


def test_settings_refuse_bad_keys_roles_and_targets() -> None:
    with pytest.raises(ConfigError, match="NAME:ROLE:KEY"):
        settings(BENCH_API_KEYS="ci:boss:0123456789abcdef0")
    with pytest.raises(ConfigError, match="shorter than 16"):
        settings(BENCH_API_KEYS="ci:engineer:short")
    with pytest.raises(ConfigError, match="BENCH_BOT_ROLE"):
        settings(BENCH_BOT_ROLE="root")
    with pytest.raises(ConfigError, match="BENCH_TARGETS"):
        settings(BENCH_TARGETS='[{"alias": "Bad Alias"}]')
    s = settings(BENCH_TARGETS='[{"alias": "anf-prod", "read_only": true}]')
    assert s.targets == (TargetInfo(alias="anf-prod", pool="default", read_only=True),)


def limits_errors(
    body: dict[str, Any], role: str, targets: list[TargetInfo] | None = None
) -> list[str]:
    from core.errors import Forbidden

    req = RunRequest.model_validate(body)
    base = req.workload or Workload()
    try:
        check_run(
            req, plan_steps(req, base), base, bool(req.fill), Caller("x", role), targets or []
        )
    except Forbidden as e:
        return [f"{x.field}: {x.message}" for x in e.errors]
    return []


def test_limits_count_every_step_and_repetition() -> None:
    base = {"target": "t", "workload": {"runtime": 100, "ramp_time": 50}}
    assert limits_errors({**base, "repetitions": 4}, "runner") == []  # 600 s: at the limit
    errors = limits_errors({**base, "repetitions": 5}, "runner")
    assert errors == ["workload.runtime: the run lasts 750 s; role runner may run 600 s at most"]
    assert limits_errors({**base, "clients": [1, 2, 4, 8]}, "runner") == [
        "clients: role runner may use at most 4"
    ]
    assert limits_errors({**base, "clients": [1, 2, 4, 8]}, "engineer") == []
    mixed_reads = {"target": "t", "workload": {"rw": "randrw", "rwmixread": 100}}
    assert limits_errors(mixed_reads, "runner") == []
    ro = [TargetInfo(alias="t", read_only=True)]
    assert limits_errors({"target": "t", "workload": {"rw": "write"}}, "admin", ro) == [
        "target: target t is read-only: this run writes (rw=write); choose a read"
    ]
    assert limits_errors({"targets": ["u", "t"], "workload": {"rw": "write"}}, "admin", ro)[
        0
    ].startswith("targets.1: target t is read-only")


def test_an_agents_identity_comes_from_its_credential() -> None:
    from core.errors import Forbidden
    from core.models.holder import AgentRef
    from functions.auth import agent_ref

    s = settings(
        BENCH_API_KEYS="vm1:agent:agent-key-0123456789abcd",
        BENCH_TRUST_EASYAUTH="1",
        BENCH_AGENT_PRINCIPALS="oid-pool",
    )
    keyed = resolve_caller({"x-api-key": "agent-key-0123456789abcd"}, s)
    assert agent_ref(keyed, "vm1") == AgentRef("vm1", principal="vm1")
    with pytest.raises(Forbidden) as posing:
        agent_ref(keyed, "vm2")  # a key names its agent
    assert posing.value.errors[0].field == "agent_id"
    # A managed identity proves the pool's agent: recorded, with the agent id it gives.
    mi = {"x-ms-client-principal": principal([]), "x-ms-client-principal-id": "oid-pool"}
    assert agent_ref(resolve_caller(mi, s), "vm7") == AgentRef("vm7", principal="agent:oid-pool")
    # Open local mode: no credential, the agent id given is all there is.
    assert agent_ref(resolve_caller({}, settings()), "vm3") == AgentRef("vm3")
