"""The service's settings (adapters/config.py): every bad value is a ConfigError naming its
variable, numbers are bounded (nan, inf and negatives refused), defaults hold, and an
unresolved Key Vault reference reads as unset."""

from __future__ import annotations

import re

import pytest

from adapters.config import SETTING_NAMES, ConfigError, Settings

BASE = {
    "BENCH_QUEUE_URI": "https://q.queue.core.windows.net/",
    "BENCH_BLOB_URI": "https://b.blob.core.windows.net",
    "BENCH_COSMOS_ENDPOINT": "https://c.documents.azure.com:443/",
}


def test_defaults_and_parsing() -> None:
    s = Settings.from_env(BASE)
    assert s.queue_uri == "https://q.queue.core.windows.net"  # no trailing slash
    assert (s.cosmos_database, s.max_deliveries, s.pools) == ("bench", 5, ("default",))
    assert s.gate_pct == 10.0
    assert (s.local_emulators, s.local_timer_seconds, s.default_role, s.bot_role) == (
        False,
        0.0,
        None,
        "runner",
    )
    s = Settings.from_env(
        {
            **BASE,
            "BENCH_POOLS": "default, gpu ,",
            "BENCH_AGENT_PRINCIPALS": "oid-1,oid-2",
            "BENCH_API_KEYS": "ci:engineer:0123456789abcdef0,vm1:agent:fedcba9876543210",
            "BENCH_MAX_DELIVERIES": "3",
            "BENCH_GATE_PCT": "12.5",
            "AZURE_CLIENT_ID": "00000000-0000-0000-0000-000000000001",
            "BENCH_DEFAULT_ROLE": "reader",
            "BENCH_COSMOS_DATABASE": "",  # empty: the default
        }
    )
    assert s.pools == ("default", "gpu")
    assert s.agent_principals == frozenset({"oid-1", "oid-2"})
    assert s.api_keys == (
        ("ci", "engineer", "0123456789abcdef0"),
        ("vm1", "agent", "fedcba9876543210"),
    )
    assert (s.max_deliveries, s.gate_pct, s.default_role) == (3, 12.5, "reader")
    assert s.managed_identity_client_id == "00000000-0000-0000-0000-000000000001"
    assert s.cosmos_database == "bench"
    assert "0123456789abcdef0" not in repr(s)  # keys and secrets stay out of logs


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("BENCH_MAX_DELIVERIES", "x"),
        ("BENCH_MAX_DELIVERIES", "-3"),
        ("BENCH_MAX_DELIVERIES", "0"),
        ("BENCH_MAX_DELIVERIES", "2.5"),
        ("BENCH_LOCAL_TIMER_SECONDS", "x"),
        ("BENCH_LOCAL_TIMER_SECONDS", "-1"),
        ("BENCH_LOCAL_TIMER_SECONDS", "nan"),
        ("BENCH_GATE_PCT", "x"),
        ("BENCH_GATE_PCT", "nan"),
        ("BENCH_GATE_PCT", "inf"),
        ("BENCH_GATE_PCT", "-5"),
        ("BENCH_GATE_PCT", "0"),
        ("BENCH_MIN_MAGNITUDE_PCT", "nan"),
        ("BENCH_LOCAL_EMULATORS", "maybe"),
        ("BENCH_TRUST_EASYAUTH", "yes please"),
        ("BENCH_BOT_ROLE", "root"),
        ("BENCH_DEFAULT_ROLE", "root"),
        ("BENCH_API_KEYS", "ci:boss:0123456789abcdef0"),
        ("BENCH_TARGETS", "not json"),
    ],
)
def test_each_bad_value_is_refused_naming_its_variable(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Settings.from_env({**BASE, name: value})
    # "NAME: …", or for a target "BENCH_TARGETS[0].alias: …", "BENCH_TARGETS is not JSON"
    assert re.match(rf"{name}[:\[ ]", str(refused.value)), str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_secret_is_never_quoted_in_a_refusal() -> None:
    with pytest.raises(ConfigError, match="BENCH_API_KEYS") as refused:
        Settings.from_env({**BASE, "BENCH_API_KEYS": "ci:engineer:short-key"})
    assert "short-key" not in str(refused.value)


def test_missing_settings_are_named_together() -> None:
    with pytest.raises(ConfigError, match="missing settings: BENCH_QUEUE_URI, BENCH_BLOB_URI"):
        Settings.from_env({"BENCH_COSMOS_ENDPOINT": "https://c"})


def test_an_unresolved_key_vault_reference_reads_as_unset() -> None:
    ref = "@Microsoft.KeyVault(VaultName=kv-bench;SecretName=x)"
    s = Settings.from_env(
        {
            **BASE,
            "BENCH_WEBHOOK_SECRET": ref,
            "BENCH_TEAMS_WEBHOOK_URL": ref,
            "AZURE_CLIENT_ID": ref,
            "BENCH_GATE_PCT": ref,
        }
    )
    assert (s.webhook_secret, s.teams_webhook_url, s.managed_identity_client_id) == (None,) * 3
    assert s.gate_pct == 10.0  # unset: the default, not a parse error on the reference
    with pytest.raises(ConfigError, match="missing settings: BENCH_QUEUE_URI"):
        Settings.from_env({**BASE, "BENCH_QUEUE_URI": ref})


def test_local_emulator_mode_talks_only_to_loopback() -> None:
    local = {
        "BENCH_QUEUE_URI": "http://127.0.0.1:10001/devstoreaccount1",
        "BENCH_BLOB_URI": "http://127.0.0.1:10000/devstoreaccount1",
        "BENCH_COSMOS_ENDPOINT": "https://localhost:8081",
        "BENCH_LOCAL_EMULATORS": "1",
    }
    assert Settings.from_env(local).local_emulators is True
    with pytest.raises(ConfigError, match=r"BENCH_LOCAL_EMULATORS: .*not https://c"):
        Settings.from_env({**local, "BENCH_COSMOS_ENDPOINT": "https://c.documents.azure.com"})


def test_every_field_has_one_variable() -> None:
    assert len(SETTING_NAMES) == len(set(SETTING_NAMES)) == len(Settings.model_fields)
    assert "AZURE_CLIENT_ID" in SETTING_NAMES
    assert all(n.startswith("BENCH_") for n in SETTING_NAMES if n != "AZURE_CLIENT_ID")
