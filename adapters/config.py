"""Settings the service reads from its environment (Function App settings in Azure).

In Azure every connection is by identity: endpoints only, no keys. The local emulators are
reached only when BENCH_LOCAL_EMULATORS=1, and then only on loopback.

pydantic-settings reads and checks them (``BENCH_`` + the field's name, bounds on numbers);
every refusal is a :class:`ConfigError` naming the variable, e.g. ``BENCH_GATE_PCT: …``.
An empty variable counts as unset (its default).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlparse

from azure.core.credentials import TokenCredential
from azure.identity import DefaultAzureCredential
from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict
from pydantic_settings.sources.utils import parse_env_vars

from core.analysis.magnitude import DEFAULT_MIN_MAGNITUDE_PCT
from core.errors import BenchError
from core.fleet.pools import PoolConfig, parse_pools
from core.retention import DAY_S, Retention
from core.runs.guardrails import AGENT_ROLE, ROLES, TargetInfo, parse_targets

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
UNRESOLVED_KEY_VAULT_REFERENCE = "@Microsoft.KeyVault("
PREFIX = "BENCH_"
NO_ROLE_VALUES = ("", "none")
# Refusals quote the value given, except for these: keys, secrets and signed URLs.
SECRET_FIELDS = frozenset(
    {"api_keys", "webhook_secret", "teams_bot_secret", "bot_secret", "teams_webhook_url"}
)


class ConfigError(BenchError):
    pass


def _csv(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(p.strip() for p in value.split(",") if p.strip())
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=PREFIX,
        env_ignore_empty=True,
        enable_decoding=False,  # lists are comma-separated or parsed below, not JSON
        extra="ignore",
        frozen=True,
    )

    queue_uri: str
    cosmos_endpoint: str
    blob_uri: str  # the artifacts container's account (Blob Storage endpoint)
    cosmos_database: str = "bench"
    max_deliveries: int = Field(5, ge=1, le=100)  # before a message goes to the poison queue
    # The agent pools that have queues (Bicep creates them), each with its size, elasticity
    # and VM price: BENCH_POOLS, NAME[:key=value...] comma-separated (core.fleet.pools).
    pool_configs: tuple[PoolConfig, ...] = Field(
        (PoolConfig(name="default"),), validation_alias="BENCH_POOLS"
    )
    local_emulators: bool = False
    # > 0: run the timer functions in-process (local stack)
    local_timer_seconds: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    # > 0: that loop ticks only while this instance holds a blob lease of this many seconds
    # (15-60; several API instances, adapters/timer_lease.py); 0: one instance, no lease.
    local_timer_lease_s: int = Field(0, ge=0, le=60)
    # /api/health answers 503 once a timer's last complete tick is older than this (the
    # timers tick every minute in Azure).
    timer_stale_s: float = Field(300.0, gt=0.0, allow_inf_nan=False)
    managed_identity_client_id: str | None = Field(None, validation_alias="AZURE_CLIENT_ID")
    public_url: str = "http://127.0.0.1:7071"  # for links in notifications
    # A single run this much worse than its segment is a regression.
    gate_pct: float = Field(10.0, gt=0.0, allow_inf_nan=False)
    # Smaller change points go unreported.
    min_magnitude_pct: float = Field(DEFAULT_MIN_MAGNITUDE_PCT, ge=0.0, allow_inf_nan=False)
    teams_webhook_url: str | None = Field(None, repr=False)  # from Key Vault in Azure
    webhook_url: str | None = None
    webhook_secret: str | None = Field(None, repr=False)  # from Key Vault in Azure
    # API key -> (name, role); local use only: in Azure callers bring Entra ID tokens.
    api_keys: tuple[tuple[str, str, str], ...] = Field((), repr=False)
    trust_easyauth: bool = False  # behind App Service Authentication (Azure)
    agent_principals: frozenset[str] = frozenset()  # object ids of the agents' identities
    # A signed-in caller whose token has no Bench.* app role: None = no access (403).
    default_role: str | None = None
    # Base64, from Teams' outgoing webhook; Key Vault
    teams_bot_secret: str | None = Field(None, repr=False)
    bot_secret: str | None = Field(None, repr=False)  # generic signed webhook; Key Vault
    bot_role: str = "runner"  # what the webhook doors' users may run
    # The Teams bot (/api/messages, Microsoft 365 Agents SDK): its Azure Bot's app id, which
    # is the Function App's user-assigned identity's client id, and its tenant. Unset: no bot.
    bot_app_id: str | None = None
    bot_tenant_id: str | None = None
    # Token issuers the bot accepts, each with its OpenID configuration (where its signing
    # keys are): JSON {issuer: configuration URL}. Unset: Bot Framework's and the tenant's
    # Entra ID issuers (adapters/bot_auth.py).
    bot_issuers: tuple[tuple[str, str], ...] = ()
    # Bot users' roles: their Bench.* app role assignments on the API's app registration
    # (this client id), read from Microsoft Graph by the app's identity.
    api_app_id: str | None = None
    graph_url: str = "https://graph.microsoft.com"
    targets: tuple[TargetInfo, ...] = ()  # empty: any alias the agents mount
    # Elastic pools' scaler: the local stack's agent processes (its directory), or in
    # Azure the scale sets (pool setting vmss) in this subscription and resource group.
    local_scaler_dir: str | None = None
    azure_subscription_id: str | None = None
    azure_resource_group: str | None = None
    # Retention (core.retention; the same values Bicep gives Cosmos DB's TTL and Blob
    # lifecycle management; the local stack's timer enforces them itself).
    activity_ttl_s: float = Field(DAY_S, gt=0.0, allow_inf_nan=False)
    agent_ttl_s: float = Field(30 * DAY_S, gt=0.0, allow_inf_nan=False)
    live_ttl_s: float = Field(DAY_S, gt=0.0, allow_inf_nan=False)
    delivery_ttl_s: float = Field(7 * DAY_S, ge=1.0, allow_inf_nan=False)
    raw_cool_days: float = Field(30.0, gt=0.0, allow_inf_nan=False)
    raw_delete_days: float = Field(365.0, gt=0.0, allow_inf_nan=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings in ``env`` (default: the process's environment)."""
        # A Key Vault reference the platform could not resolve arrives as its own text;
        # taken literally it would become a guessable HMAC key. Treat it as unset.
        given = os.environ if env is None else env
        clean = {
            k: ("" if v.startswith(UNRESOLVED_KEY_VAULT_REFERENCE) else v) for k, v in given.items()
        }
        missing = [n for n in (setting_name(f) for f in REQUIRED) if not clean.get(n)]
        if missing:
            raise ConfigError(f"missing settings: {', '.join(missing)}")
        try:
            return cls(_build_sources=((_Environment(cls, clean),), {}))
        except ValidationError as e:
            raise ConfigError("; ".join(_named(err) for err in e.errors())) from None

    @field_validator("queue_uri", "blob_uri", "public_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @property
    def retention(self) -> Retention:
        return Retention(
            activity_ttl_s=self.activity_ttl_s,
            agent_ttl_s=self.agent_ttl_s,
            live_ttl_s=self.live_ttl_s,
            delivery_ttl_s=self.delivery_ttl_s,
            raw_cool_days=self.raw_cool_days,
            raw_delete_days=self.raw_delete_days,
        )

    @property
    def pools(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.pool_configs)

    def pool(self, name: str) -> PoolConfig:
        """A pool's configuration (a bare name when BENCH_POOLS declares nothing)."""
        found = {p.name: p for p in self.pool_configs}
        return found.get(name) or PoolConfig(name=name)

    @field_validator("pool_configs", mode="before")
    @classmethod
    def _pools(cls, value: Any) -> Any:
        return parse_pools(value) if isinstance(value, str) else value

    @field_validator("agent_principals", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        return _csv(value)

    @field_validator("api_keys", mode="before")
    @classmethod
    def _api_keys(cls, value: Any) -> Any:
        """Comma-separated NAME:ROLE:KEY (role ``agent`` for agents)."""
        if not isinstance(value, str):
            return value
        keys = []
        for entry in _csv(value):
            name, role, key = [*entry.split(":", 2), "", ""][:3]
            if not name or not key or (role not in ROLES and role != AGENT_ROLE):
                raise ValueError(f"{name or entry[:8]!r}: expected NAME:ROLE:KEY")
            if len(key) < 16:
                raise ValueError(f"key of {name} is shorter than 16 characters")
            keys.append((name, role, key))
        return tuple(keys)

    @field_validator("default_role", mode="before")
    @classmethod
    def _no_role(cls, value: Any) -> Any:
        """Unset, empty or ``none`` means no role, hence no access."""
        return None if value in NO_ROLE_VALUES else value

    @field_validator("default_role", "bot_role")
    @classmethod
    def _a_role(cls, value: str | None) -> str | None:
        if value is not None and value not in ROLES:
            raise ValueError(f"{value!r} is not one of {', '.join(ROLES)}")
        return value

    @field_validator("bot_issuers", mode="before")
    @classmethod
    def _issuers(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            data = json.loads(value)
        except ValueError as e:
            raise ValueError(f"not JSON: {e}") from None
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()
        ):
            raise ValueError('expected {"<issuer>": "<OpenID configuration URL>", ...}')
        return tuple(data.items())

    @field_validator("bot_issuers")
    @classmethod
    def _issuers_over_tls(
        cls, value: tuple[tuple[str, str], ...], info: ValidationInfo
    ) -> tuple[tuple[str, str], ...]:
        for _, url in value:
            _tls_unless_local(url, info)
        return value

    @field_validator("graph_url")
    @classmethod
    def _graph(cls, value: str, info: ValidationInfo) -> str:
        return _tls_unless_local(value, info).rstrip("/")

    @field_validator("targets", mode="before")
    @classmethod
    def _targets(cls, value: Any) -> Any:
        return tuple(parse_targets(value)) if isinstance(value, str) else value

    @field_validator("raw_delete_days")
    @classmethod
    def _cool_before_delete(cls, value: float, info: ValidationInfo) -> float:
        cool = info.data.get("raw_cool_days")
        if cool is not None and cool >= value:
            raise ValueError(f"{value:g} days: raw artifacts go cool first ({cool:g} days)")
        return value

    @model_validator(mode="after")
    def _loopback_only_when_local(self) -> Settings:
        if self.local_scaler_dir and not self.local_emulators:
            raise ValueError("BENCH_LOCAL_SCALER_DIR is for the local stack only")
        if self.local_emulators:
            for uri in (self.queue_uri, self.blob_uri, self.cosmos_endpoint):
                if urlparse(uri).hostname not in LOOPBACK_HOSTS:
                    raise ValueError(f"local emulator mode only talks to loopback, not {uri}")
        return self


def _tls_unless_local(url: str, info: ValidationInfo) -> str:
    """Signing keys and roles come only over TLS, except from the local stack's loopback."""
    parts = urlparse(url)
    local = info.data.get("local_emulators") and parts.hostname in LOOPBACK_HOSTS
    if parts.scheme != "https" and not local:
        raise ValueError(f"{url} is not https")
    return url


REQUIRED = ("queue_uri", "blob_uri", "cosmos_endpoint")


def setting_name(field: str) -> str:
    """The environment variable a field is read from."""
    alias = Settings.model_fields[field].validation_alias
    return alias if isinstance(alias, str) else f"{PREFIX}{field.upper()}"


# Every setting the code reads, for the Bicep/app-settings cross-check.
SETTING_NAMES = tuple(setting_name(f) for f in Settings.model_fields)


class _Environment(EnvSettingsSource):
    """The variables of the mapping given to :meth:`Settings.from_env`, not ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        self._given = env
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(
            self._given, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


def _named(err: Any) -> str:
    """One pydantic error as ``VARIABLE: problem`` (a model-level check names the mode)."""
    loc = err.get("loc") or ()
    field = str(loc[0]) if loc else "local_emulators"
    name = setting_name(field) if field in Settings.model_fields else field
    if err.get("type") == "value_error":
        message = str(err["ctx"]["error"])
    else:
        message = err["msg"]
        if field not in SECRET_FIELDS and isinstance(err.get("input"), str):
            message = f"{err['input']!r}: {message}"
    return message if message.startswith(name) else f"{name}: {message}"


def azure_credential(client_id: str | None) -> TokenCredential:
    """DefaultAzureCredential: managed identity in Azure, developer login elsewhere."""

    return DefaultAzureCredential(managed_identity_client_id=client_id)
