"""The PostgreSQL schema of the cloud engine, created or migrated on open.

Every table is prefixed `kc_` so the engine can share a database with
other applications. The SQL is in this package's sql/ folder (package data,
so a wheel carries it): sql/NNN_*.sql is schema version NNN, numbered from
001 without gaps, and `kc_meta.schema_version` says how many of them ran;
opening runs the missing ones under an advisory lock, so brokers starting
together migrate once. Migrations change tables; the functions are all
CREATE OR REPLACE, so sql/functions.sql holds only their current definitions
and is run after any migration: a database of any older version ends with
the same functions as a new one. A change to functions.sql therefore comes
with a new version (a new numbered file, with only a comment if no table
changes), or databases already at the newest version would keep the old
definitions.

The write path is one function call, `kc_commit`: it records an uploaded
object and assigns offsets to its batches in one transaction, locking the
partitions it touches in id order (two brokers committing overlapping sets
cannot deadlock). Calling it again with the same object key returns the
offsets the first call assigned, so a commit whose answer was lost on the
network is retried without assigning offsets twice. Since version 2 it also
fences: a batch whose leader epoch is no longer the one kc_partition_leaders
holds is refused. Since version 3 it also rolls compacted partitions'
segments, which the log cleaner works on. Since version 4 it fences appends
that are not a produce request's (transaction markers) and stamps every
fenced batch with the leader table's epoch (see FUNCTIONS). Since version 5 it
keeps each batch's header in its index row (a control batch whole), so a new
leader rebuilds its producers' state from the database instead of reading the
log tail's objects one by one: that read grew with the log and made every
failover slower than the one before. Since version 6 a broker announces a
commit's partitions after it (`p_notify` false, then kc_notify_partitions in a
transaction of its own): a NOTIFY inside the commit held PostgreSQL's
database-wide notify lock through the commit's WAL flush, so the brokers'
commits queued behind one another. Since version 7 it refuses a transactional
batch whose producer's transaction in the partition ended while the batch waited
(`p_since`: a marker of that producer stored at or after the offset named).
"""

from __future__ import annotations

import re
import uuid
from importlib import resources
from typing import Any

from ..errors import StorageError

SCHEMA_LOCK = 0x6B63_7363  # advisory lock id: "kcsc"
DATA_CHANNEL = "kc_data"  # NOTIFY: partitions' high watermarks and log starts moved
NAMESPACE_CHANNEL = "kc_namespace"  # NOTIFY: a stream, topic, cursor group, state table or setting changed
CLEANED_CHANNEL = "kc_cleaned"  # NOTIFY: the cleaner replaced a partition's index rows below an offset

_MIGRATION_FILE = re.compile(r"(\d{3})_[a-z0-9_]+\.sql")


def _has_statements(sql: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith("--") for line in sql.splitlines())


def _load_migrations() -> list[str]:
    """The numbered files of sql/, in order: index i holds schema version i + 1; "" for a version
    that changed no table (only a comment: PostgreSQL answers a statement-less query with no status)."""
    found = {}
    for entry in resources.files(__package__).joinpath("sql").iterdir():
        match = _MIGRATION_FILE.fullmatch(entry.name)
        if match:
            sql = entry.read_text(encoding="utf-8")
            found[int(match.group(1))] = sql if _has_statements(sql) else ""
    if sorted(found) != list(range(1, len(found) + 1)):
        raise RuntimeError(f"the cloud engine's migrations must be numbered 001.. without gaps, not {sorted(found)}")
    return [found[version] for version in sorted(found)]


MIGRATIONS: list[str] = _load_migrations()
FUNCTIONS: str = resources.files(__package__).joinpath("sql", "functions.sql").read_text(encoding="utf-8")


async def migrate(pool: Any) -> tuple[uuid.UUID, int]:
    """Bring the database to the newest schema version under the advisory lock (one broker at a
    time) and count this opening: (store id, open counter). A database of a newer version than
    this broker knows is refused."""
    async with pool.acquire() as conn:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK)
            exists = await conn.fetchval("SELECT to_regclass('kc_meta') IS NOT NULL")
            version = (await conn.fetchval("SELECT schema_version FROM kc_meta") if exists else 0) or 0
            if version > len(MIGRATIONS):
                raise StorageError(f"the database holds schema version {version}, newer than this broker "
                                   f"knows ({len(MIGRATIONS)}): upgrade the broker")
            for sql in MIGRATIONS[version:]:
                if sql:
                    await conn.execute(sql)
            if version < len(MIGRATIONS):  # any migration brings the functions up to date too
                await conn.execute(FUNCTIONS)
            if not version:
                await conn.execute("INSERT INTO kc_meta (schema_version, store_id) VALUES ($1, $2) "
                                   "ON CONFLICT (one) DO NOTHING", len(MIGRATIONS), uuid.uuid4())
            await conn.execute("UPDATE kc_meta SET schema_version = $1", len(MIGRATIONS))
            row = await conn.fetchrow("UPDATE kc_meta SET epoch = epoch + 1 RETURNING store_id, epoch")
    return row["store_id"], row["epoch"]
