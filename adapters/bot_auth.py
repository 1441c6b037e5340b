"""Who may post activities to the Teams bot: the Microsoft 365 Agents SDK's token validation,
against an explicit list of issuers.

Every activity carries a bearer token signed by the channel (Bot Framework, or Entra ID).
The SDK's ``JwtTokenValidator`` checks it (RS256 signature, expiry with its 5 min leeway,
audience = the bot's app id, the issuer against ``AgentAuthConfiguration.ISSUERS`` with
``VALIDATE_ISSUER`` on, Entra tenant binding); this module only says where each accepted
issuer's signing keys are: at the ``jwks_uri`` of the issuer's OpenID configuration, as
OpenID Connect Discovery has it, rather than at the SDK's two built-in addresses. So the
same code validates Bot Framework's tokens in Azure and a test issuer's on loopback. A token
from any other issuer is refused before anything is fetched for it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Mapping

import httpx
from jwt import PyJWK, PyJWKClient, PyJWTError
from jwt import decode as jwt_decode
from microsoft_agents.hosting.core import AgentAuthConfiguration
from microsoft_agents.hosting.core.authorization import AuthTypes, ClaimsIdentity
from microsoft_agents.hosting.core.authorization.jwt import JwtTokenValidator
from pydantic import BaseModel, ConfigDict

log = logging.getLogger(__name__)

BOT_FRAMEWORK_ISSUER = "https://api.botframework.com"
BOT_FRAMEWORK_OPENID = "https://login.botframework.com/v1/.well-known/openidconfiguration"
CONFIG_TTL_S = 24 * 3600  # OpenID configurations change rarely; keys rotate within them


class OpenIdConfiguration(BaseModel):
    """The two fields of an issuer's OpenID configuration read here (it has many more)."""

    model_config = ConfigDict(extra="ignore")

    issuer: str | None = None
    jwks_uri: str | None = None


def default_issuers(tenant_id: str) -> dict[str, str]:
    """Bot Framework's issuer (Teams' tokens) and the tenant's Entra ID issuers, v1 and v2."""
    login = f"https://login.microsoftonline.com/{tenant_id}"
    return {
        BOT_FRAMEWORK_ISSUER: BOT_FRAMEWORK_OPENID,
        f"https://sts.windows.net/{tenant_id}/": f"{login}/.well-known/openid-configuration",
        f"{login}/v2.0": f"{login}/v2.0/.well-known/openid-configuration",
    }


def auth_configuration(
    app_id: str, tenant_id: str, issuers: Mapping[str, str]
) -> AgentAuthConfiguration:
    """The SDK's configuration: the bot's identity (the Function App's user-assigned managed
    identity, no secret), its tenant, and the issuers it accepts, checked (not anonymous)."""
    return AgentAuthConfiguration(
        auth_type=AuthTypes.user_managed_identity,
        client_id=app_id,
        tenant_id=tenant_id,
        issuers=list(issuers),
        validate_issuer=True,
        anonymous_allowed=False,
    )


class IssuerKeys:
    """Each accepted issuer's signing keys, found through its OpenID configuration."""

    def __init__(self, issuers: Mapping[str, str], *, timeout_s: float = 5.0) -> None:
        self._configs = dict(issuers)
        self._timeout_s = timeout_s
        self._jwks: dict[str, tuple[str, float]] = {}  # issuer -> (jwks_uri, fetched at)
        self._clients: dict[str, PyJWKClient] = {}
        self._lock = threading.Lock()

    def jwks_uri(self, issuer: str) -> str | None:
        """The issuer's key set address; None for an issuer not accepted."""
        config_url = self._configs.get(issuer)
        if config_url is None:
            return None
        with self._lock:
            known = self._jwks.get(issuer)
            if known and time.monotonic() - known[1] < CONFIG_TTL_S:
                return known[0]
            r = httpx.get(config_url, timeout=self._timeout_s, follow_redirects=False)
            r.raise_for_status()
            config = OpenIdConfiguration.model_validate_json(r.content)
            # OpenID Connect Discovery 1.0, 4.3: the configuration must name the issuer
            # it was fetched for.
            if config.issuer != issuer or config.jwks_uri is None:
                raise ValueError(f"OpenID configuration of {issuer} names another issuer")
            self._jwks[issuer] = (config.jwks_uri, time.monotonic())
            return config.jwks_uri

    def signing_key(self, jwks_uri: str, kid: str) -> PyJWK:
        with self._lock:
            client = self._clients.get(jwks_uri)
            if client is None:
                client = self._clients[jwks_uri] = PyJWKClient(
                    jwks_uri, timeout=int(self._timeout_s)
                )
        return client.get_signing_key(kid)  # refetches the set once for an unknown kid


class _KeysAt:
    """What the SDK's validator asks for its keys: here, the key set of the token's issuer
    (the address the SDK built from its own table is not used)."""

    def __init__(self, keys: IssuerKeys, jwks_uri: str) -> None:
        self._keys = keys
        self._jwks_uri = jwks_uri

    async def get_signing_key(self, _sdk_uri: str, header: Mapping[str, object]) -> PyJWK:
        # The token's JOSE header, as the SDK's validator hands it over.
        return await asyncio.to_thread(self._keys.signing_key, self._jwks_uri, str(header["kid"]))


class IssuerTokenValidator(JwtTokenValidator):
    def __init__(self, configuration: AgentAuthConfiguration, keys: IssuerKeys) -> None:
        super().__init__(configuration)
        self._keys = keys

    async def validate_token(self, token: str) -> ClaimsIdentity:
        issuer = jwt_decode(token, options={"verify_signature": False}).get("iss")
        uri = (
            await asyncio.to_thread(self._keys.jwks_uri, issuer)
            if isinstance(issuer, str)
            else None
        )
        if uri is None:
            raise ValueError("Invalid issuer.")
        self._jwk_client_manager = _KeysAt(self._keys, uri)  # type: ignore[assignment]
        return await super().validate_token(token)


async def authorize(
    header: str | None, configuration: AgentAuthConfiguration, keys: IssuerKeys
) -> ClaimsIdentity | None:
    """The token's claims, or None (answer 401) for a missing, malformed, unsigned or badly
    signed token, an expired one, one for another audience or from another issuer."""
    parts = (header or "").split(" ")
    if len(parts) != 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    try:
        return await IssuerTokenValidator(configuration, keys).validate_token(parts[1])
    except (PyJWTError, ValueError, KeyError, httpx.HTTPError) as e:
        # The type only: the message could carry the token's contents.
        log.warning("bot token refused: %s", type(e).__name__)
        return None
