"""SASL/PLAIN (RFC 4616), checked against the user's stored SCRAM credential.

There is no separate PLAIN password store: a user made with `kafkacompat
user add` or kafka-configs.sh (SCRAM-SHA-256 or -512) logs in with PLAIN
using the same password, as on Kafka brokers whose PLAIN callback reads
SCRAM credentials. The password is hashed with the stored salt and
iteration count and compared with the stored key; it is never kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .scram import MECHANISMS, AuthenticationFailed, ScramCredential, password_matches

INVALID = "Authentication failed: Invalid username or password"  # Kafka's PlainSaslServer message


def parse_plain(token: bytes) -> tuple[str, str]:
    """(username, password) of a PLAIN token `authzid NUL authcid NUL passwd`."""
    parts = token.split(b"\x00")
    if len(parts) != 3:
        raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
    try:
        authzid, username, password = (part.decode("utf-8") for part in parts)
    except UnicodeDecodeError:
        raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
    if not username:
        raise AuthenticationFailed("Authentication failed: username not specified")
    if not password:
        raise AuthenticationFailed("Authentication failed: password not specified")
    if authzid and authzid != username:
        raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                   "different from username")
    return username, password


async def verify_plain(token: bytes, lookup: Callable[[str, str], ScramCredential | None]) -> str:
    """The user name when the PLAIN token's password matches a stored credential; else AuthenticationFailed.

    The key derivation (thousands of PBKDF2 rounds) runs in a thread so a
    flood of logins does not stall other clients' requests.
    """
    username, password = parse_plain(token)
    for mechanism in reversed(MECHANISMS):  # the stronger one first
        credential = lookup(username, mechanism)
        if credential is not None:
            if await asyncio.to_thread(password_matches, mechanism, credential, password):
                return username
            break
    raise AuthenticationFailed(INVALID)
