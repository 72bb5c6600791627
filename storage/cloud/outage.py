"""Database failures, named: the one place the cloud engine turns them into StorageUnavailableError.

A PostgreSQL outage, a restart, or a connection the server dropped
(`pg_terminate_backend`, a failover) reaches the engine as OSError,
asyncpg.PostgresError, asyncpg.InterfaceError or a timeout. Callers of a
Store catch StorageError and answer the Kafka error code Kafka gives
(KAFKA_STORAGE_ERROR for a partition's data, NOT_COORDINATOR for a
coordinator's state), so none of those may leave the store untranslated:
an untranslated one closes the client's connection or ends a background
task instead of answering a retriable error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from types import TracebackType

from ..errors import StorageUnavailableError

log = logging.getLogger(__name__)


def database_errors() -> tuple[type[BaseException], ...]:
    """What asyncpg raises when the database cannot be reached or dropped the connection (or refused
    a statement). InternalClientError too: a session the server ended while a statement was being
    sent raises it ("cannot switch to state ..."). asyncpg is imported here, not at module load: it
    is an optional dependency."""
    import asyncpg

    return (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, asyncio.TimeoutError)


def retriable_database_errors() -> tuple[type[BaseException], ...]:
    """The failures a repeat of the same statement may get past: a lost or refused connection
    (server restarting, connection terminated by an administrator), a deadlock, a serialization
    failure. Only for statements safe to repeat (kc_commit is: a repeat returns the first offsets)."""
    import asyncpg

    return (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError, asyncpg.InternalClientError,
            asyncpg.OperatorInterventionError, asyncpg.DeadlockDetectedError, asyncpg.SerializationError,
            asyncio.TimeoutError)


LOG_EVERY_S = 10.0  # an outage fails every read and write at once: one line per this many seconds
_logged_at = float("-inf")
_unlogged = 0


def unavailable_error(what: str, exc: BaseException) -> StorageUnavailableError:
    """The named error for a failed database step (raise it `from exc`), logged here: one line, no
    traceback (the cause is the database, not this broker), at most one every LOG_EVERY_S."""
    global _logged_at, _unlogged
    now = time.monotonic()
    if now - _logged_at >= LOG_EVERY_S:
        more = f" ({_unlogged} more such failures since the last report)" if _unlogged else ""
        log.warning("%s failed: the database is unavailable (%s: %s)%s", what, type(exc).__name__, exc, more)
        _logged_at, _unlogged = now, 0
    else:
        _unlogged += 1
    return StorageUnavailableError(f"{what} failed: the database is unavailable ({exc})")


class database_step:  # noqa: N801 - used as a statement: `with database_step("writing x"):`
    """Run a block of database work; what the database raises leaves it as StorageUnavailableError.

    StorageErrors raised on purpose inside (NotLeaderError, TopicExistsError...) pass unchanged.
    A class, not a generator, so type checkers see that it never swallows an exception.
    """

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if exc is not None and isinstance(exc, database_errors()):
            raise unavailable_error(self.what, exc) from exc
