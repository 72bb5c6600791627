"""Remembers HTTP Basic logins already verified, so REST's hot path skips PBKDF2.

A Basic client sends its password with every request, and checking it
against the stored SCRAM credential costs thousands of PBKDF2 rounds. A
login that succeeded is remembered as an HMAC of the password under a key
that lives only in this process, together with the stored credential it
matched: a changed or deleted credential (kafka-configs.sh, `kafkacompat
user`) no longer matches, so the next request is checked in full again.
Failed logins are never remembered. The cache is bounded; the oldest entry
goes first.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Callable

from ..security.sasl_plain import verify_plain
from ..security.scram import MECHANISMS, ScramCredential

Lookup = Callable[[str, str], ScramCredential | None]
MAX_ENTRIES = 1024


class LoginCache:
    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._key = secrets.token_bytes(32)
        self._max = max_entries
        self._entries: OrderedDict[tuple[str, bytes], tuple] = OrderedDict()

    async def verify(self, username: str, password: str, lookup: Lookup) -> str:
        """The user name when the password matches its stored credential; else AuthenticationFailed."""
        entry = (username, hmac.new(self._key, password.encode(), hashlib.sha256).digest())
        current = _fingerprint(username, lookup)
        if current is not None and self._entries.get(entry) == current:
            self._entries.move_to_end(entry)
            return username
        token = b"\0" + username.encode() + b"\0" + password.encode()
        name = await verify_plain(token, lookup)
        if current is not None:
            self._entries[entry] = current
            self._entries.move_to_end(entry)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return name


def _fingerprint(username: str, lookup: Lookup) -> tuple | None:
    """What identifies the user's stored credentials now; None when the user has none."""
    found = tuple((m, c.salt, c.stored_key, c.iterations) for m in MECHANISMS if (c := lookup(username, m)))
    return found or None
