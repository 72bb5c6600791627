"""SASL/OAUTHBEARER (RFC 7628, KIP-255) with OIDC JWT validation as Kafka's broker does it (KIP-768).

Users of Kafka, Confluent and Redpanda sign in with a JWT access token from
their identity provider (Keycloak, Okta, Entra ID, ...). The broker checks the
token itself, as Kafka's OAuthBearerValidatorCallbackHandler does: its
signature against the provider's JWKS (a file or an http(s) URL, re-read every
sasl_oauthbearer_jwks_endpoint_refresh_ms and when a token names a key id the
set does not have yet, at most once a second), `exp` and `iat` present and
`exp`/`nbf` honoured with sasl_oauthbearer_clock_skew_seconds, the expected
issuer and audience when set, a non-empty subject claim
(sasl_oauthbearer_sub_claim_name) that names the principal User:<sub>, and a
well-formed scope claim. The session ends when the token expires (Kafka's
credential lifetime), so clients re-authenticate with a fresh token.

PyJWT parses the JWKS and checks signatures and registered claims: it is the
maintained JOSE library of Python and already brings the RSA/EC/EdDSA keys
through `cryptography`; hand-written signature checking is how token
validators go wrong. The same validator serves `Authorization: Bearer` on
the HTTP port (kafkacompat/http/principal.py).

A refused token is answered as Kafka's OAuthBearerSaslServer answers: the
challenge `{"status":"invalid_token"}`, then, once the client acknowledges it
with a lone 0x01, SASL_AUTHENTICATION_FAILED carrying that JSON.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import pathlib
import re
import urllib.parse
from typing import Any, Protocol

from .scram import INVALID_CREDENTIALS, AuthenticationFailed

log = logging.getLogger(__name__)


class BearerSettings(Protocol):
    """The broker settings a token is checked against (kafkacompat.config.BrokerConfig has them; this module
    is below the configuration, which checks the JWKS location with check_jwks_location)."""

    sasl_oauthbearer_jwks_endpoint_url: str | None
    sasl_oauthbearer_jwks_endpoint_refresh_ms: int
    sasl_oauthbearer_expected_issuer: str | None
    sasl_oauthbearer_expected_audience: list[str]
    sasl_oauthbearer_sub_claim_name: str
    sasl_oauthbearer_scope_claim_name: str
    sasl_oauthbearer_clock_skew_seconds: int

MECHANISM = "OAUTHBEARER"
INVALID_TOKEN = '{"status":"invalid_token"}'  # the challenge Kafka's validator answers every bad token with
# signature algorithms a JWKS key can verify (never "none", never HMAC: a JWKS holds public keys)
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES256K", "ES384", "ES512", "EdDSA")
LATEST_EXPIRY_S = 253_402_300_799  # 9999-12-31T23:59:59Z
MIN_REFETCH_S = 1.0  # an unknown key id refetches the JWKS at most this often (a stranger cannot flood the IdP)
_KEY, _VALUE = re.compile(r"[A-Za-z]+"), re.compile(r"[\x21-\x7e \t\r\n]+")  # RFC 7628 key, value
_TOKEN = re.compile(r"[-_.a-zA-Z0-9]+")  # what Kafka's server accepts as the bearer token (JWS compact form)
_SASLNAME = re.compile(r"(?:[^=,\x00]|=2C|=3D)+")


class InvalidBearerToken(Exception):
    """A token the validator refuses; str() says why (for the audit log, never sent to the client)."""


@dataclasses.dataclass(frozen=True, slots=True)
class BearerToken:
    """A validated access token: whom it logs in, its scopes, until when."""

    principal_name: str
    scopes: frozenset[str]
    expiry_ms: int


def check_jwks_location(url: str) -> str | None:
    """Why `url` cannot be a JWKS location (http, https or file), else None."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme in ("http", "https") and parsed.netloc:
        return None
    if parsed.scheme == "file":
        path = pathlib.Path(urllib.parse.unquote(parsed.path))
        return None if path.is_file() else f"{path} is not a readable file"
    return f"{url!r} is not an http://, https:// or file:// URL"


class BearerValidator:
    """Validates JWT access tokens against one identity provider's keys; shared by the Kafka and HTTP ports."""

    def __init__(self, config: BearerSettings) -> None:
        assert config.sasl_oauthbearer_jwks_endpoint_url is not None
        self._url = config.sasl_oauthbearer_jwks_endpoint_url
        self._issuer = config.sasl_oauthbearer_expected_issuer
        self._audience = list(config.sasl_oauthbearer_expected_audience)
        self._sub_claim = config.sasl_oauthbearer_sub_claim_name
        self._scope_claim = config.sasl_oauthbearer_scope_claim_name
        self._skew = config.sasl_oauthbearer_clock_skew_seconds
        self._refresh_s = config.sasl_oauthbearer_jwks_endpoint_refresh_ms / 1000
        self._keys: list[tuple[Any, str | None]] = []  # (PyJWK, the algorithm it pins) of the latest good JWKS
        self._fetched_at = float("-inf")  # loop time of the latest fetch attempt
        self._fetch: asyncio.Task[None] | None = None  # the fetch in flight, shared by whoever waits for it
        self._refresher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Load the keys (a failure is logged; logins are refused until a later fetch works), then refresh."""
        await self._refetch()
        self._refresher = asyncio.create_task(self._refresh_forever(), name="jwks refresh")

    async def close(self) -> None:
        for task in (self._refresher, self._fetch):
            if task is not None:
                task.cancel()
        await asyncio.gather(*(t for t in (self._refresher, self._fetch) if t is not None), return_exceptions=True)

    async def _refresh_forever(self) -> None:
        while True:
            await asyncio.sleep(self._refresh_s)
            await self._refetch()

    async def _refetch(self) -> None:
        """One fetch at a time: callers arriving while it runs wait for the same one."""
        if self._fetch is None or self._fetch.done():
            self._fetched_at = asyncio.get_running_loop().time()
            self._fetch = asyncio.create_task(self._load(), name="jwks fetch")
        await asyncio.shield(self._fetch)

    async def _load(self) -> None:
        import jwt  # PyJWT and cryptography load at the first token, not with every broker
        try:
            keys = _signing_keys(await self._read())
        except (OSError, ValueError, jwt.PyJWTError, asyncio.TimeoutError) as exc:
            log.warning("cannot load the JWKS from %s (logins use the keys loaded before, if any): %s",
                        self._url, exc)
            return
        if [key.key_id for key, _ in keys] != [key.key_id for key, _ in self._keys]:
            log.info("JWKS from %s: key ids %s", self._url, ", ".join(str(key.key_id) for key, _ in keys))
        self._keys = keys

    async def _read(self) -> dict[str, Any]:
        parsed = urllib.parse.urlparse(self._url)
        if parsed.scheme == "file":
            path = pathlib.Path(urllib.parse.unquote(parsed.path))
            return json.loads(await asyncio.to_thread(path.read_bytes))
        import aiohttp  # a dependency of the broker (the HTTP port); imported where it is needed

        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
                async with session.get(self._url, headers={"Accept": "application/json"}) as response:
                    if response.status != 200:
                        raise OSError(f"HTTP {response.status} {response.reason}")
                    return json.loads(await response.read())
        except aiohttp.ClientError as exc:
            raise OSError(str(exc) or type(exc).__name__) from None

    async def _keys_for(self, kid: str | None, algorithm: str) -> list[Any]:
        """The keys that may have signed a token naming `kid` and `algorithm`; an unknown kid refetches first."""
        def matching() -> list[Any]:
            return [key for key, pinned in self._keys
                    if (kid is None or key.key_id == kid) and pinned in (None, algorithm)]

        found = matching()
        if not found and asyncio.get_running_loop().time() - self._fetched_at >= MIN_REFETCH_S:
            await self._refetch()  # key rotation: the provider may have published it since
            found = matching()
        return found

    async def validate(self, token: str) -> BearerToken:
        """The token's principal, scopes and expiry; InvalidBearerToken says why it is refused."""
        import jwt  # PyJWT and cryptography load at the first token, not with every broker
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidBearerToken(f"malformed JWT: {exc}") from None
        algorithm, kid = header.get("alg"), header.get("kid")
        if algorithm not in ALGORITHMS:
            raise InvalidBearerToken(f"signature algorithm {str(algorithm)[:20]!r} is not accepted")
        keys = await self._keys_for(kid if isinstance(kid, str) else None, algorithm)
        if not keys:
            raise InvalidBearerToken(f"no key with id {str(kid)[:64]!r} in the JWKS of {self._url}")
        claims = self._decode(token, algorithm, keys)
        return self._token(claims)

    def _decode(self, token: str, algorithm: str, keys: list[Any]) -> dict[str, Any]:
        import jwt  # PyJWT and cryptography load at the first token, not with every broker
        # iat must be there but may lie ahead (Kafka's jose4j checks no more); exp and nbf are checked with the skew
        options = {"require": ["exp", "iat"], "verify_aud": bool(self._audience), "verify_iat": False}
        error: Exception | None = None
        for key in keys:
            try:
                return jwt.decode(token, key.key, algorithms=[algorithm], audience=self._audience or None,
                                  issuer=self._issuer, leeway=self._skew, options=options)
            except jwt.InvalidSignatureError as exc:  # maybe another key (no kid): try the next
                error = exc
            except jwt.PyJWTError as exc:
                raise InvalidBearerToken(f"Could not validate the access token: {exc}") from None
        raise InvalidBearerToken(f"Could not validate the access token: {error or 'no key for its algorithm'}")

    def _token(self, claims: dict[str, Any]) -> BearerToken:
        subject = claims.get(self._sub_claim)
        if not isinstance(subject, str) or not subject.strip():
            raise InvalidBearerToken(f"the {self._sub_claim!r} claim is missing or empty")
        scopes = claims.get(self._scope_claim)
        scopes = [scopes] if isinstance(scopes, str) else scopes if isinstance(scopes, list) else []  # as Kafka
        if not all(isinstance(scope, str) and scope.strip() for scope in scopes):
            raise InvalidBearerToken(f"the {self._scope_claim!r} claim holds an empty or non-text scope")
        for claim in ("iat", "exp"):  # NumericDate (RFC 7519); PyJWT also takes strings of digits, jose4j does not
            if not _numeric_date(claims[claim]):
                raise InvalidBearerToken(f"the {claim!r} claim is not a number")
        # an exp past year 9999 (a provider writing milliseconds) is cut there rather than overflow the session
        expiry_s = min(int(claims["exp"]), LATEST_EXPIRY_S)
        return BearerToken(subject.strip(), frozenset(scope.strip() for scope in scopes), expiry_s * 1000)


def _numeric_date(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return not isinstance(value, float) or math.isfinite(value)


def _signing_keys(document: Any) -> list[tuple[Any, str | None]]:
    """(PyJWK, pinned algorithm) of each usable signing key of a JWKS document; keys PyJWT cannot use are skipped."""
    import jwt  # PyJWT and cryptography load at the first token, not with every broker
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("not a JWKS document (no \"keys\" list)")
    keys = []
    for entry in document["keys"]:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig" or entry.get("kty") == "oct":
            continue  # not a public signing key (a shared secret has no place in a published JWKS)
        try:
            keys.append((jwt.PyJWK(entry), entry.get("alg")))
        except jwt.PyJWTError as exc:
            log.info("JWKS key %s skipped: %s", entry.get("kid"), exc)
    if not keys:
        raise ValueError("the JWKS has no usable signing key")
    return keys


def claimed_subject(token: str, claim: str) -> str | None:
    """The subject a token claims, unverified: for the audit line of a refused login only."""
    import jwt  # PyJWT and cryptography load at the first token, not with every broker
    try:
        value = jwt.decode(token, options={"verify_signature": False}).get(claim)
    except jwt.PyJWTError:
        return None
    return value[:256] if isinstance(value, str) else None


def parse_client_first(message: bytes) -> tuple[str, str, dict[str, str]]:
    """(authzid, bearer token, extensions) of an RFC 7628 client first message:
    `n,[a=authzid],` 0x01 `auth=Bearer <token>` 0x01 [`key=value` 0x01 ...] 0x01.

    Anything else is AuthenticationFailed with Kafka's message for a malformed exchange.
    """
    refused = AuthenticationFailed(INVALID_CREDENTIALS.format(MECHANISM))
    try:
        text = message.decode("ascii")
    except UnicodeDecodeError:
        raise refused from None
    gs2, sep, rest = text.partition("\x01")
    parts = gs2.split(",")
    if not sep or len(parts) != 3 or parts[0] != "n" or parts[2] or not rest.endswith("\x01\x01"):
        raise refused
    authzid = ""
    if parts[1]:
        if not parts[1].startswith("a=") or not _SASLNAME.fullmatch(parts[1][2:]):
            raise refused
        authzid = parts[1][2:].replace("=2C", ",").replace("=3D", "=")
    pairs: dict[str, str] = {}
    for pair in rest[:-2].split("\x01"):
        key, eq, value = pair.partition("=")
        if not eq or not _KEY.fullmatch(key) or not _VALUE.fullmatch(value) or key in pairs:
            raise refused
        pairs[key] = value
    scheme, _, token = pairs.pop("auth", "").partition(" ")
    token = token.strip(" ")
    if scheme.lower() != "bearer" or not _TOKEN.fullmatch(token):
        raise refused
    return authzid, token, pairs


class OAuthBearerServer:
    """One OAUTHBEARER exchange on a connection: the client first message, then (after a refusal) its 0x01."""

    def __init__(self, validator: BearerValidator | None, sub_claim: str) -> None:
        self._validator = validator
        self._sub_claim = sub_claim
        self.token: BearerToken | None = None  # set when the exchange succeeded
        self.refusal: str | None = None  # why the token was refused (for the audit line), until the 0x01
        self.claimed: str | None = None  # the subject a refused token claims

    async def evaluate(self, message: bytes) -> bytes:
        if message == b"\x01" and self.refusal is not None:
            raise AuthenticationFailed(INVALID_TOKEN)
        self.refusal = None
        authzid, value, _extensions = parse_client_first(message)  # Kafka's validator accepts any extensions
        if self._validator is None:
            raise AuthenticationFailed(INVALID_CREDENTIALS.format(MECHANISM))
        try:
            token = await self._validator.validate(value)
        except InvalidBearerToken as exc:
            self.refusal, self.claimed = str(exc), claimed_subject(value, self._sub_claim)
            return INVALID_TOKEN.encode()
        if authzid and authzid != token.principal_name:
            raise AuthenticationFailed(f"Authentication failed: Client requested an authorization id ({authzid}) "
                                       f"that is different from the token's principal name ({token.principal_name})")
        self.token = token
        return b""

