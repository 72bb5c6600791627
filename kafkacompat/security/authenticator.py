"""The SASL state of one connection on a SASL_PLAINTEXT or SASL_SSL listener.

Kafka's order: (ApiVersions,) SaslHandshake naming a mechanism, then the
mechanism's tokens - inside SaslAuthenticate requests (handshake v1+) or
as bare length-prefixed frames (handshake v0, older clients). Until that
succeeds only those requests are served; anything else closes the
connection. With connections.max.reauth.ms the session has a lifetime:
the client re-authenticates (same principal, same mechanism) before it
ends, or the connection is closed at its next request. A login with a
delegation token lives at most until the token expires (KIP-368), so a
client re-authenticates then and keeps going only if the token was renewed;
so does an OAUTHBEARER login, whose session ends when its JWT expires.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from .credentials import Credentials
from .delegation_tokens import DelegationTokens
from .oauthbearer import MECHANISM as OAUTHBEARER
from .oauthbearer import BearerValidator, OAuthBearerServer
from .principal import user
from .sasl_plain import verify_plain
from .scram import AuthenticationFailed, ScramServer

audit = logging.getLogger("kafkacompat.audit")

SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY, API_VERSIONS_KEY = 17, 36, 18
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})


class SaslAuthenticator:
    def __init__(
        self,
        mechanisms: Sequence[str],
        credentials: Credentials,
        tokens: DelegationTokens,
        *,
        reauth_ms: int,
        peer: str,
        listener: str,
        oauth: BearerValidator | None = None,
        sub_claim: str = "sub",
    ) -> None:
        self.mechanisms = tuple(mechanisms)
        self._credentials = credentials
        self._tokens = tokens
        self._reauth_ms = reauth_ms
        self._peer = peer
        self._listener = listener
        self._oauth = oauth
        self._sub_claim = sub_claim
        self.principal: str | None = None  # set when the first authentication succeeds
        self.mechanism: str | None = None  # chosen by the latest handshake
        self.raw_tokens = False  # handshake v0: the next frame is a bare token
        self.failed = False  # the connection closes once the failure answer is sent
        self.expires_at: float | None = None  # loop time the session ends (connections.max.reauth.ms, token expiry)
        self.token_id: str | None = None  # the delegation token of the latest login, if it used one
        self._lifetime_ms = 0  # what SaslAuthenticate v1+ tells the client
        self._exchange: ScramServer | None = None
        self._bearer: OAuthBearerServer | None = None
        self._in_progress = False  # between a handshake and the end of its exchange

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def expired(self) -> bool:
        return self.expires_at is not None and asyncio.get_running_loop().time() >= self.expires_at

    def handshake(self, mechanism: str, version: int) -> bool:
        """Start an exchange with `mechanism`; False when it is not enabled (UNSUPPORTED_SASL_MECHANISM)."""
        if mechanism not in self.mechanisms:
            self.failed = True
            audit.warning("authentication failed: client=%s listener=%s mechanism=%s: mechanism not enabled",
                          self._peer, self._listener, mechanism[:64])
            return False
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._in_progress = True
        self._exchange = None
        self._bearer = None
        return True

    @property
    def expecting_token(self) -> bool:
        return self._in_progress

    async def evaluate(self, token: bytes) -> bytes:
        """The answer to one client token; AuthenticationFailed (already logged) when the login is refused."""
        mechanism = self.mechanism
        assert mechanism is not None and self._in_progress
        if mechanism == OAUTHBEARER:
            return await self._evaluate_bearer(token)
        try:
            if mechanism == "PLAIN":
                name = await verify_plain(token, self._credentials.lookup)
                self._succeed(name)
                return b""
            if self._exchange is None:
                self._exchange = ScramServer(mechanism, lambda u: self._credentials.lookup(u, mechanism),
                                             lambda token_id: self._tokens.login(token_id, mechanism))
            answer = self._exchange.evaluate(token)
            exchange = self._exchange
            if exchange.done:
                assert exchange.authorization_id is not None
                self._succeed(exchange.authorization_id, exchange.username if exchange.token else None,
                              exchange.token.expiry_ms if exchange.token else None)
            return answer
        except AuthenticationFailed as exc:
            self.failed = True
            self._in_progress = False
            username = self._exchange.username if self._exchange is not None else _plain_user(token, mechanism)
            who = user(username) if username else "?"
            if self._exchange is not None and self._exchange.token_auth:  # the name was a token id, not a user
                who = f"? delegation_token={username}"
            self._audit_failure(who, str(exc))
            raise

    async def _evaluate_bearer(self, message: bytes) -> bytes:
        """OAUTHBEARER: a refused token is answered with Kafka's error challenge, and audited then; the
        client's 0x01 that acknowledges it ends the exchange with SASL_AUTHENTICATION_FAILED."""
        if self._bearer is None:
            self._bearer = OAuthBearerServer(self._oauth, self._sub_claim)
        exchange = self._bearer
        acknowledging = message == b"\x01" and exchange.refusal is not None
        try:
            answer = await exchange.evaluate(message)
            if exchange.token is not None:
                scopes = ",".join(sorted(exchange.token.scopes))[:256]
                self._succeed(exchange.token.principal_name, token_expiry_ms=exchange.token.expiry_ms,
                              note=f" scope={scopes}" if scopes else "")
            elif exchange.refusal is not None:
                self._audit_failure(user(exchange.claimed) if exchange.claimed else "?", exchange.refusal)
            return answer
        except AuthenticationFailed as exc:
            self.failed = True
            self._in_progress = False
            if not acknowledging:  # the refusal of a bad token was audited when it was answered
                self._audit_failure(user(exchange.token.principal_name) if exchange.token else "?", str(exc))
            raise

    def _audit_failure(self, who: str, reason: str) -> None:
        audit.warning("authentication failed: principal=%s client=%s listener=%s mechanism=%s: %s",
                      who, self._peer, self._listener, self.mechanism, reason)

    def _succeed(self, name: str, token_id: str | None = None, token_expiry_ms: int | None = None,
                 note: str = "") -> None:
        """The login of `name` is accepted; `note` ends its audit line (an OAUTHBEARER token's scopes)."""
        principal = user(name)
        if self.principal is not None and principal != self.principal:
            raise AuthenticationFailed(f"Cannot change principals during re-authentication from {self.principal}: "
                                       f"{principal}")
        first = self.principal is None
        self.principal = principal
        self.token_id = token_id
        self._in_progress = False
        self.raw_tokens = False
        self._exchange = None
        self._lifetime_ms = self._reauth_ms
        if token_expiry_ms is not None:  # KIP-368: the session ends with the (delegation or JWT) token's credential
            left = max(token_expiry_ms - self._tokens.now_ms(), 0)
            self._lifetime_ms = min(left, self._reauth_ms) if self._reauth_ms > 0 else left
        self.expires_at = None
        if self._lifetime_ms > 0 or token_expiry_ms is not None:
            self.expires_at = asyncio.get_running_loop().time() + self._lifetime_ms / 1000
        audit.info("%s: principal=%s client=%s listener=%s mechanism=%s%s",
                   "authenticated" if first else "re-authenticated", principal, self._peer, self._listener,
                   self.mechanism, f" delegation_token={token_id}" if token_id else note)

    @property
    def token_authenticated(self) -> bool:
        """Whether the session logged in with a delegation token (which may then not manage tokens)."""
        return self.token_id is not None

    @property
    def session_lifetime_ms(self) -> int:
        """What SaslAuthenticate v1+ tells the client (0: no re-authentication needed)."""
        return self._lifetime_ms if self.authenticated else 0


def _plain_user(token: bytes, mechanism: str) -> str | None:
    """The user name a failed PLAIN token claimed, for the audit line (never the password)."""
    if mechanism != "PLAIN":
        return None
    parts = token.split(b"\x00")
    return parts[1].decode("utf-8", "replace")[:256] if len(parts) == 3 else None
