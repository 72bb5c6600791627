"""Delegation tokens (KIP-48): a user lends its identity to workers that log in without its password.

A token is an id (a Kafka Uuid) and its HMAC, HmacSHA512 of the id under
the broker's delegation_token_secret_key, as Kafka computes it. A worker
logs in with SCRAM, the token id as user name, the base64 HMAC as password
and the SCRAM extension tokenauth=true; its principal is the token's owner.

Each token's facts (owner, requester, renewers, timestamps) are kept in the
default stream's state table `delegation_tokens`, beside the SCRAM users,
so tokens survive a restart. The HMAC is never stored: it is computed again
from the secret key, so a copy of the store without the key logs no one
in, and another key after a restart makes every token useless (as on Kafka).

The rules follow Kafka's DelegationTokenControlManager (create, renew,
expire) and DelegationTokenManager (who may describe which token). An
expired token logs no one in from the moment it expires; its record goes
at the next token request or expiry check (delegation_token_expiry_check_interval_ms,
hourly as on Kafka), whichever comes first.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import hmac
import logging
import time
from collections.abc import Callable, Sequence

from kio.schema.errors import ErrorCode

from kafkacompat.storage import StorageError, Store

from .scram import MECHANISMS, ScramCredential, TokenLogin, make_credential

log = logging.getLogger(__name__)
audit = logging.getLogger("kafkacompat.audit")

TABLE = "delegation_tokens"
USER_TYPE = "User"


@dataclasses.dataclass(frozen=True, slots=True)
class TokenInfo:
    """What Kafka's TokenInformation holds: principals as "Type:name" strings, times in ms since the epoch."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def expired(self, now_ms: int) -> bool:
        return self.max_ms < now_ms or self.expiry_ms < now_ms

    def owner_or_renewer(self, principal: str) -> bool:
        """Kafka's ownerOrRenewer: the owner, the requester and the renewers may renew, expire and describe it."""
        return principal in (self.owner, self.requester) or principal in self.renewers

    def record(self) -> dict:
        return {"owner": self.owner, "requester": self.requester, "renewers": list(self.renewers),
                "issue_ms": self.issue_ms, "max_ms": self.max_ms, "expiry_ms": self.expiry_ms}

    @classmethod
    def from_record(cls, token_id: str, record: dict) -> TokenInfo:
        return cls(token_id, record["owner"], record["requester"], tuple(record["renewers"]),
                   int(record["issue_ms"]), int(record["max_ms"]), int(record["expiry_ms"]))


def split_principal(principal: str) -> tuple[str, str]:
    """("User", "alice") of "User:alice", as Kafka's SecurityUtils.parseKafkaPrincipal splits it."""
    kind, _, name = principal.partition(":")
    return kind, name


def _saturating_add(now_ms: int, period_ms: int) -> int:
    """now + period, capped at Long.MAX_VALUE as Kafka's sum() caps it."""
    return min(now_ms + period_ms, 2**63 - 1)


class DelegationTokens:
    """The tokens of one store. `clock` (seconds since the epoch) is what tests move to age tokens."""

    def __init__(self, store: Store, stream: str, secret_key: str | None, max_lifetime_ms: int,
                 expiry_time_ms: int) -> None:
        self._store = store
        self._stream = stream
        self._key = secret_key.encode() if secret_key else None
        self.max_lifetime_ms = max_lifetime_ms
        self.expiry_time_ms = expiry_time_ms
        self.clock: Callable[[], float] = time.time
        self._credentials: dict[tuple[str, str], ScramCredential] = {}  # (token id, mechanism), made at first login
        self._checker: asyncio.Task[None] | None = None

    def start(self, check_interval_ms: int) -> None:
        """Remove expired tokens every `check_interval_ms` (Kafka's delegation.token.expiry.check.interval.ms)."""
        if self.enabled:
            self._checker = asyncio.get_running_loop().create_task(self._check_every(check_interval_ms),
                                                                   name="delegation token expiry")

    async def close(self) -> None:
        checker, self._checker = self._checker, None
        if checker is not None:
            checker.cancel()
            try:
                await checker
            except asyncio.CancelledError:
                pass

    async def _check_every(self, interval_ms: int) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await self.remove_expired()
            except StorageError as exc:  # the store is away (logged there): the next check tries again
                log.warning("removing expired delegation tokens failed: %s", exc)

    @property
    def enabled(self) -> bool:
        """Kafka's tokenAuthEnabled: a non-empty delegation.token.secret.key."""
        return self._key is not None

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def hmac(self, token_id: str) -> bytes:
        assert self._key is not None
        return hmac.new(self._key, token_id.encode(), hashlib.sha512).digest()

    def tokens(self) -> list[TokenInfo]:
        """Every stored token, expired or not, in creation order."""
        found = [TokenInfo.from_record(token_id, record)
                 for token_id, record in self._store.get_state(self._stream, TABLE).items()]
        return sorted(found, key=lambda t: (t.issue_ms, t.token_id))

    def _by_hmac(self, mac: bytes) -> TokenInfo | None:
        if not self.enabled:
            return None
        return next((t for t in self.tokens() if hmac.compare_digest(self.hmac(t.token_id), mac)), None)

    async def create(self, token_id: str, owner: str, requester: str, renewers: Sequence[str],
                     max_lifetime_ms: int) -> TokenInfo:
        """A new token: it lives delegation_token_expiry_time_ms unless renewed, never past its max time."""
        await self.remove_expired()
        now = self.now_ms()
        lifetime = min(self.max_lifetime_ms, max_lifetime_ms) if max_lifetime_ms > 0 else self.max_lifetime_ms
        max_ms = _saturating_add(now, lifetime)
        token = TokenInfo(token_id, owner, requester, tuple(renewers), now, max_ms,
                          min(max_ms, _saturating_add(now, self.expiry_time_ms)))
        await self._store.put_state(self._stream, TABLE, {token_id: token.record()})
        audit.info("delegation token created: token=%s owner=%s requester=%s renewers=%s", token_id, owner,
                   requester, ",".join(renewers) or "-")
        return token

    async def renew(self, principal: str, mac: bytes, renew_period_ms: int) -> tuple[ErrorCode, int]:
        """(error, new expiry): a renewal moves the expiry to now + the period, at most the broker's expiry time."""
        token, now = self._by_hmac(mac), self.now_ms()
        answer: tuple[ErrorCode, int]
        if token is None:
            answer = ErrorCode.delegation_token_not_found, 0
        elif token.expired(now):
            answer = ErrorCode.delegation_token_expired, 0
        elif not token.owner_or_renewer(principal):
            answer = ErrorCode.delegation_token_owner_mismatch, 0
        else:
            period = min(self.expiry_time_ms, renew_period_ms) if renew_period_ms > 0 else self.expiry_time_ms
            answer = ErrorCode.none, await self._set_expiry(token, now + period)
        await self.remove_expired()
        return answer

    async def expire(self, principal: str, mac: bytes, expiry_period_ms: int) -> tuple[ErrorCode, int]:
        """(error, new expiry): a negative period removes the token at once, else it ends after the period."""
        token, now = self._by_hmac(mac), self.now_ms()
        answer: tuple[ErrorCode, int]
        if token is None:
            answer = ErrorCode.delegation_token_not_found, 0
        elif not token.owner_or_renewer(principal):
            answer = ErrorCode.delegation_token_owner_mismatch, 0
        elif expiry_period_ms < 0:
            await self._remove([token.token_id])
            audit.info("delegation token expired: token=%s owner=%s by=%s", token.token_id, token.owner, principal)
            answer = ErrorCode.none, now
        elif token.expired(now):
            answer = ErrorCode.delegation_token_expired, 0
        else:
            answer = ErrorCode.none, await self._set_expiry(token, _saturating_add(now, expiry_period_ms))
        await self.remove_expired()
        return answer

    async def _set_expiry(self, token: TokenInfo, expiry_ms: int) -> int:
        """Store the token's new expiry (never past its max time); the expiry stored."""
        expiry = min(token.max_ms, expiry_ms)
        await self._store.put_state(self._stream, TABLE, {token.token_id: dataclasses.replace(
            token, expiry_ms=expiry).record()})
        return expiry

    async def remove_expired(self) -> list[TokenInfo]:
        """Drop the tokens past their expiry or max time (Kafka's sweepExpiredDelegationTokens); those dropped."""
        now = self.now_ms()
        gone = [token for token in self.tokens() if token.expired(now)]
        if gone:
            await self._remove([token.token_id for token in gone])
            for token in gone:
                audit.info("delegation token removed past its expiry: token=%s owner=%s", token.token_id, token.owner)
        return gone

    async def _remove(self, token_ids: list[str]) -> None:
        await self._store.put_state(self._stream, TABLE, dict.fromkeys(token_ids))
        self._credentials = {key: cred for key, cred in self._credentials.items() if key[0] not in token_ids}

    def login(self, token_id: str, mechanism: str) -> TokenLogin | None:
        """The SCRAM credential of a live token, as Kafka derives it: the base64 HMAC is the password."""
        if not self.enabled or mechanism not in MECHANISMS:
            return None
        record = self._store.get_state(self._stream, TABLE).get(token_id)
        if record is None:
            return None
        token = TokenInfo.from_record(token_id, record)
        if token.expired(self.now_ms()):
            return None
        credential = self._credentials.get((token_id, mechanism))
        if credential is None:
            password = base64.b64encode(self.hmac(token_id)).decode()
            credential = self._credentials[(token_id, mechanism)] = make_credential(mechanism, password)
        return TokenLogin(credential, split_principal(token.owner)[1], token.expiry_ms)


def describable(token: TokenInfo, requester: str, owners: Sequence[str] | None,
                may_describe_token: Callable[[str], bool], may_describe_owner: Callable[[str], bool]) -> bool:
    """Kafka's DelegationTokenManager.filterToken: whether DescribeDelegationToken shows `token` to `requester`.

    With `owners`, only tokens one of them owns, requested or may renew; of
    those, a requester sees its own (owner, requester or renewer) and others
    it has DESCRIBE on (the DelegationToken resource) or DESCRIBE_TOKENS on
    (the owner's User resource).
    """
    if owners is not None and not any(token.owner_or_renewer(owner) for owner in owners):
        return False
    if token.owner_or_renewer(requester):
        return True
    return may_describe_token(token.token_id) or may_describe_owner(token.owner)
