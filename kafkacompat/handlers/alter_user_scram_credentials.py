"""AlterUserScramCredentials: add or delete users' SCRAM credentials online (kafka-configs.sh --entity-type users).

The client sends the salted password (PBKDF2 done client-side, as Kafka's
admin client does); the broker keeps only the StoredKey/ServerKey pair
derived from it. Checks and messages follow Kafka's ScramControlManager.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Protocol

from kafkacompat import storage

from ..security.scram import MAX_ITERATIONS, MIN_ITERATIONS, credential_from_salted
from ..services import Controller, Request, Security
from .common import NO_THROTTLE, ErrorCode, at_controller, make, schema_of, storage_error_code
from .describe_user_scram_credentials import MECHANISM_CODES
from .registry import Api, changes


def _users(request: Any) -> tuple[str, ...]:
    """One result per user a deletion or an upsertion names, sorted (Kafka's getErrorResponse)."""
    return tuple(sorted({item.name for item in (*request.deletions, *request.upsertions)}))


# AlterUserScramCredentials v0
API = Api(51, (0, 0), changes(("deletions", "upsertions"), "results", items=_users))

MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}


def _refusal(item: Any, upsert: bool, twice: bool) -> tuple[ErrorCode, str] | None:
    if twice:
        return ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"
    if not item.name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if item.mechanism not in MECHANISM_NAMES:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if upsert and item.iterations < MIN_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too few iterations"
    if upsert and item.iterations > MAX_ITERATIONS:
        return ErrorCode.unacceptable_credential, "Too many iterations"
    return None


class ScramChanges(Security, Controller, Protocol):
    """The SCRAM users, and the controller that writes them (ALTER on the cluster is checked by the connection:
    security/refusals.py)."""


async def handle(ctx: Request[ScramChanges], request: Any) -> Any:
    if (forwarded := await at_controller(ctx, request)) is not None:
        return forwarded
    m = schema_of(ctx)
    credentials = ctx.cluster.credentials
    counts = Counter(i.name for i in (*request.deletions, *request.upsertions))  # Kafka: one change per user
    outcome: dict[str, tuple[ErrorCode, str | None]] = {}

    def record(name: str, result: tuple[ErrorCode, str | None]) -> None:
        if outcome.get(name, (ErrorCode.none, None))[0] == ErrorCode.none:  # a user's first error is reported
            outcome[name] = result

    for item in request.deletions:
        refusal = _refusal(item, False, counts[item.name] > 1)
        try:
            if refusal is None and not await credentials.delete(item.name, MECHANISM_NAMES[item.mechanism]):
                refusal = ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"
        except storage.StorageError as exc:  # not stored (the store logged why): the credential stays
            refusal = storage_error_code(exc), str(exc)
        record(item.name, refusal or (ErrorCode.none, None))
    for item in request.upsertions:
        refusal = _refusal(item, True, counts[item.name] > 1)
        if refusal is None:
            mechanism = MECHANISM_NAMES[item.mechanism]
            credential = credential_from_salted(mechanism, item.salted_password, item.salt, item.iterations)
            try:
                await credentials.set(item.name, mechanism, credential)
            except storage.StorageError as exc:  # not stored: the user's credentials are as they were
                refusal = storage_error_code(exc), str(exc)
        record(item.name, refusal or (ErrorCode.none, None))
    results = tuple(make(m.AlterUserScramCredentialsResult, user=name, error_code=code, error_message=message)
                    for name, (code, message) in outcome.items())
    return make(m.AlterUserScramCredentialsResponse, throttle_time=NO_THROTTLE, results=results)
