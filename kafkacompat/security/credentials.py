"""User credentials (SCRAM keys) kept in the store, in the default stream's state table `scram_credentials`.

One record per user: {mechanism: {salt, stored_key, server_key, iterations}}.
The offline `kafkacompat user` commands and the online
AlterUserScramCredentials API write the same records, so the first admin
can exist before the broker ever starts (as `kafka-storage format
--add-scram` does on Kafka).
"""

from __future__ import annotations

from kafkacompat.storage import Store

from .scram import MECHANISMS, ScramCredential

TABLE = "scram_credentials"


class Credentials:
    """The users of one store, read through on every login (an admin's change applies at once)."""

    def __init__(self, store: Store, stream: str) -> None:
        self._store = store
        self._stream = stream

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """user -> mechanism -> credential, for every user with at least one credential."""
        return {
            user: {mech: ScramCredential.from_record(rec) for mech, rec in record.items() if mech in MECHANISMS}
            for user, record in sorted(self._store.get_state(self._stream, TABLE).items())
        }

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        record = self._store.get_state(self._stream, TABLE).get(user)
        if not record or mechanism not in record:
            return None
        return ScramCredential.from_record(record[mechanism])

    async def set(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        record = dict(self._store.get_state(self._stream, TABLE).get(user) or {})
        record[mechanism] = credential.to_record()
        await self._store.put_state(self._stream, TABLE, {user: record})

    async def delete(self, user: str, mechanism: str | None = None) -> bool:
        """Remove one mechanism's credential (or all of a user's); whether there was one."""
        record = dict(self._store.get_state(self._stream, TABLE).get(user) or {})
        if mechanism is None:
            found = bool(record)
            record = {}
        else:
            found = record.pop(mechanism, None) is not None
        if found:
            await self._store.put_state(self._stream, TABLE, {user: record or None})
        return found
