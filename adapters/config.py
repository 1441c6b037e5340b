"""Settings the service reads from its environment (Function App settings in Azure).

In Azure every connection is by identity: endpoints only, no keys. The local emulators are
reached only when BENCH_LOCAL_EMULATORS=1, and then only on loopback.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from urllib.parse import urlparse

from azure.core.credentials import TokenCredential
from azure.identity import DefaultAzureCredential

from core.analysis.changepoint import DEFAULT_MIN_MAGNITUDE_PCT
from core.errors import BenchError
from core.fleet.pools import PoolConfig, parse_pools
from core.runs.guardrails import AGENT_ROLE, ROLES, TargetInfo, parse_targets

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})

# Every setting the code reads, for the Bicep/app-settings cross-check.
SETTING_NAMES = (
    "BENCH_QUEUE_URI",
    "BENCH_BLOB_URI",
    "BENCH_COSMOS_ENDPOINT",
    "BENCH_COSMOS_DATABASE",
    "BENCH_MAX_DELIVERIES",
    "BENCH_POOLS",
    "BENCH_LOCAL_EMULATORS",
    "BENCH_LOCAL_TIMER_SECONDS",
    "AZURE_CLIENT_ID",
    "BENCH_PUBLIC_URL",
    "BENCH_GATE_PCT",
    "BENCH_MIN_MAGNITUDE_PCT",
    "BENCH_TEAMS_WEBHOOK_URL",
    "BENCH_WEBHOOK_URL",
    "BENCH_WEBHOOK_SECRET",
    "BENCH_API_KEYS",
    "BENCH_TRUST_EASYAUTH",
    "BENCH_AGENT_PRINCIPALS",
    "BENCH_DEFAULT_ROLE",
    "BENCH_TEAMS_BOT_SECRET",
    "BENCH_BOT_SECRET",
    "BENCH_BOT_ROLE",
    "BENCH_TARGETS",
    "BENCH_LOCAL_SCALER_DIR",
    "BENCH_AZURE_SUBSCRIPTION_ID",
    "BENCH_AZURE_RESOURCE_GROUP",
)


UNRESOLVED_KEY_VAULT_REFERENCE = "@Microsoft.KeyVault("


class ConfigError(BenchError):
    pass


@dataclass(frozen=True)
class Settings:
    queue_uri: str
    cosmos_endpoint: str
    blob_uri: str = ""  # the artifacts container's account (Blob Storage endpoint)
    cosmos_database: str = "bench"
    max_deliveries: int = 5
    pools: tuple[str, ...] = ("default",)  # agent pools that have queues (Bicep creates them)
    # Each pool's size, elasticity and VM price (BENCH_POOLS NAME[:key=value...]).
    pool_configs: tuple[PoolConfig, ...] = ()
    local_emulators: bool = False
    local_timer_seconds: float = 0.0  # > 0: run the timer functions in-process (local stack)
    managed_identity_client_id: str | None = None
    public_url: str = "http://127.0.0.1:7071"  # for links in notifications
    gate_pct: float = 10.0  # a single run this much worse than its segment is a regression
    min_magnitude_pct: float = DEFAULT_MIN_MAGNITUDE_PCT  # smaller change points go unreported
    teams_webhook_url: str | None = None  # from Key Vault in Azure
    webhook_url: str | None = None
    webhook_secret: str | None = None  # from Key Vault in Azure
    # API key -> (name, role); local use only: in Azure callers bring Entra ID tokens.
    api_keys: tuple[tuple[str, str, str], ...] = ()
    trust_easyauth: bool = False  # behind App Service Authentication (Azure)
    agent_principals: frozenset[str] = frozenset()  # object ids of the agents' identities
    # A signed-in caller whose token has no Bench.* app role: None = no access (403).
    default_role: str | None = None
    teams_bot_secret: str | None = None  # Base64, from Teams' outgoing webhook; Key Vault
    bot_secret: str | None = None  # generic signed webhook; Key Vault
    bot_role: str = "runner"  # what chat users may run
    targets: tuple[TargetInfo, ...] = ()  # empty: any alias the agents mount
    # Elastic pools' scaler: the local stack's agent processes (its directory), or in
    # Azure the scale sets (pool setting vmss) in this subscription and resource group.
    local_scaler_dir: str | None = None
    azure_subscription_id: str | None = None
    azure_resource_group: str | None = None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        # A Key Vault reference the platform could not resolve arrives as its own text;
        # taken literally it would become a guessable HMAC key. Treat it as unset.
        e = {
            k: ("" if v.startswith(UNRESOLVED_KEY_VAULT_REFERENCE) else v)
            for k, v in (os.environ if env is None else env).items()
        }
        required = ("BENCH_QUEUE_URI", "BENCH_BLOB_URI", "BENCH_COSMOS_ENDPOINT")
        missing = [k for k in required if not e.get(k)]
        if missing:
            raise ConfigError(f"missing settings: {', '.join(missing)}")
        try:
            pool_configs = parse_pools(e.get("BENCH_POOLS", "default"))
        except ValueError as err:
            raise ConfigError(str(err)) from None
        settings = cls(
            queue_uri=e["BENCH_QUEUE_URI"].rstrip("/"),
            blob_uri=e["BENCH_BLOB_URI"].rstrip("/"),
            cosmos_endpoint=e["BENCH_COSMOS_ENDPOINT"],
            cosmos_database=e.get("BENCH_COSMOS_DATABASE", "bench"),
            max_deliveries=int(e.get("BENCH_MAX_DELIVERIES", "5")),
            pools=tuple(p.name for p in pool_configs),
            pool_configs=pool_configs,
            local_emulators=e.get("BENCH_LOCAL_EMULATORS") == "1",
            local_timer_seconds=float(e.get("BENCH_LOCAL_TIMER_SECONDS", "0")),
            managed_identity_client_id=e.get("AZURE_CLIENT_ID") or None,
            public_url=e.get("BENCH_PUBLIC_URL", "http://127.0.0.1:7071").rstrip("/"),
            gate_pct=float(e.get("BENCH_GATE_PCT", "10")),
            min_magnitude_pct=_percent(
                "BENCH_MIN_MAGNITUDE_PCT",
                e.get("BENCH_MIN_MAGNITUDE_PCT", ""),
                DEFAULT_MIN_MAGNITUDE_PCT,
            ),
            teams_webhook_url=e.get("BENCH_TEAMS_WEBHOOK_URL") or None,
            webhook_url=e.get("BENCH_WEBHOOK_URL") or None,
            webhook_secret=e.get("BENCH_WEBHOOK_SECRET") or None,
            api_keys=_api_keys(e.get("BENCH_API_KEYS", "")),
            trust_easyauth=e.get("BENCH_TRUST_EASYAUTH") == "1",
            agent_principals=frozenset(
                p.strip() for p in e.get("BENCH_AGENT_PRINCIPALS", "").split(",") if p.strip()
            ),
            default_role=_default_role(e.get("BENCH_DEFAULT_ROLE", "")),
            teams_bot_secret=e.get("BENCH_TEAMS_BOT_SECRET") or None,
            bot_secret=e.get("BENCH_BOT_SECRET") or None,
            bot_role=_role("BENCH_BOT_ROLE", e.get("BENCH_BOT_ROLE", "runner")),
            targets=tuple(_targets(e.get("BENCH_TARGETS", ""))),
            local_scaler_dir=e.get("BENCH_LOCAL_SCALER_DIR") or None,
            azure_subscription_id=e.get("BENCH_AZURE_SUBSCRIPTION_ID") or None,
            azure_resource_group=e.get("BENCH_AZURE_RESOURCE_GROUP") or None,
        )
        if settings.local_scaler_dir and not settings.local_emulators:
            raise ConfigError("BENCH_LOCAL_SCALER_DIR is for the local stack only")
        if settings.local_emulators:
            for uri in (settings.queue_uri, settings.blob_uri, settings.cosmos_endpoint):
                if urlparse(uri).hostname not in LOOPBACK_HOSTS:
                    raise ConfigError(f"local emulator mode only talks to loopback, not {uri}")
        return settings

    def pool(self, name: str) -> PoolConfig:
        """A pool's configuration (a bare name when BENCH_POOLS declares nothing)."""
        found = {p.name: p for p in self.pool_configs}
        return found.get(name) or PoolConfig(name=name)


def _percent(setting: str, value: str, default: float) -> float:
    if not value.strip():
        return default
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number >= 0.0):
        raise ConfigError(f"{setting}: {value!r} is not a percentage >= 0")
    return number


def _role(setting: str, value: str) -> str:
    if value not in ROLES:
        raise ConfigError(f"{setting}: {value!r} is not one of {', '.join(ROLES)}")
    return value


NO_ROLE_VALUES = ("", "none")


def _default_role(value: str) -> str | None:
    """BENCH_DEFAULT_ROLE: unset, empty or ``none`` means no role, hence no access."""
    return None if value in NO_ROLE_VALUES else _role("BENCH_DEFAULT_ROLE", value)


def _targets(text: str) -> list[TargetInfo]:
    try:
        return parse_targets(text)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _api_keys(text: str) -> tuple[tuple[str, str, str], ...]:
    """BENCH_API_KEYS: comma-separated NAME:ROLE:KEY (role ``agent`` for agents)."""
    keys = []
    for entry in filter(None, (x.strip() for x in text.split(","))):
        name, role, key = [*entry.split(":", 2), "", ""][:3]
        if not name or not key or (role not in ROLES and role != AGENT_ROLE):
            raise ConfigError(f"BENCH_API_KEYS: {name or entry[:8]!r}: expected NAME:ROLE:KEY")
        if len(key) < 16:
            raise ConfigError(f"BENCH_API_KEYS: key of {name} is shorter than 16 characters")
        keys.append((name, role, key))
    return tuple(keys)


def azure_credential(client_id: str | None) -> TokenCredential:
    """DefaultAzureCredential: managed identity in Azure, developer login elsewhere."""

    return DefaultAzureCredential(managed_identity_client_id=client_id)
