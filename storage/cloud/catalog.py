"""The namespace's rows in PostgreSQL: streams, topics, partitions, cursors and state tables.

The SQL that reads and writes what every broker of a cloud store keeps in
memory as its namespace, apart from the store that keeps that view current
(store.py: when to read, what to forget, whom to notify). Each function runs
on a connection the caller holds, inside the caller's transaction.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..api import Cursor, FsyncPolicy, PermissionEntries, StreamPolicy, TopicInfo
from ..errors import StreamExistsError, TopicExistsError

PARTITION_ROWS = "SELECT id, idx, next_offset, log_start, leader_epoch FROM kc_partitions WHERE topic_id = $1"


def policy_to_json(policy: StreamPolicy) -> str:
    out = dataclasses.asdict(policy)
    out["fsync"] = FsyncPolicy(policy.fsync).value
    return json.dumps(out)


def policy_from_json(text: str) -> StreamPolicy:
    data = json.loads(text)
    fields = {f.name for f in dataclasses.fields(StreamPolicy)}
    values = {k: v for k, v in data.items() if k in fields}
    values["permissions"] = PermissionEntries(**data.get("permissions", {}))
    values["fsync"] = FsyncPolicy(data.get("fsync", FsyncPolicy.INTERVAL.value))
    return StreamPolicy(**values)


def _cursor(r: Any) -> Cursor:
    return Cursor(r["topic"], r["part"], r["offset"], r["leader_epoch"], r["metadata"], r["commit_ms"])


# reading --------------------------------------------------------------------------------------

async def read_settings(conn: Any) -> dict[str, str]:
    return {r["key"]: r["value"] for r in await conn.fetch("SELECT key, value FROM kc_settings")}


async def stream_paths(conn: Any) -> list[str]:
    return [r["path"] for r in await conn.fetch("SELECT path FROM kc_streams")]


async def read_stream(conn: Any, path: str) -> tuple[StreamPolicy, int] | None:
    """A stream's (policy, created_ms); None when it is gone."""
    row = await conn.fetchrow("SELECT policy::text, created_ms FROM kc_streams WHERE path = $1", path)
    return None if row is None else (policy_from_json(row["policy"]), row["created_ms"])


@dataclasses.dataclass(frozen=True, slots=True)
class StreamContents:
    cursors: dict[str, dict[tuple[str, int], Cursor]]  # group -> (topic, partition) -> cursor
    tables: dict[str, dict[str, Any]]  # state table -> key -> value


async def read_stream_contents(conn: Any, path: str) -> StreamContents:
    """A stream's cursors and its state tables."""
    cursors = await conn.fetch('SELECT grp, topic, part, "offset", leader_epoch, metadata, commit_ms '
                               "FROM kc_cursors WHERE stream = $1", path)
    state = await conn.fetch("SELECT tbl, key, value::text FROM kc_state WHERE stream = $1", path)
    by_group: dict[str, dict[tuple[str, int], Cursor]] = {}
    for r in cursors:
        by_group.setdefault(r["grp"], {})[(r["topic"], r["part"])] = _cursor(r)
    tables: dict[str, dict[str, Any]] = {}
    for r in state:
        tables.setdefault(r["tbl"], {})[r["key"]] = json.loads(r["value"])
    return StreamContents(by_group, tables)


async def read_topics(conn: Any, path: str) -> list[tuple[TopicInfo, list[Any]]]:
    """Every topic of a stream and its partitions' rows, as read_topic gives one, in two statements of
    one snapshot. Read topic by topic, a broker starting on a store of 20,000 topics made 40,000 round
    trips to the database: 21 s before it listened."""
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        topics = await conn.fetch("SELECT id, name, partitions, configs::text, created_ms FROM kc_topics "
                                  "WHERE stream = $1", path)
        parts = await conn.fetch("SELECT p.topic_id, p.id, p.idx, p.next_offset, p.log_start, p.leader_epoch "
                                 "FROM kc_partitions p JOIN kc_topics t ON t.id = p.topic_id WHERE t.stream = $1", path)
    by_topic: dict[Any, list[Any]] = {}
    for r in parts:
        by_topic.setdefault(r["topic_id"], []).append(r)
    return [(_topic_info(path, r["name"], r), by_topic.get(r["id"], [])) for r in topics]


async def read_topic(conn: Any, path: str, name: str) -> tuple[TopicInfo, list[Any]] | None:
    """A topic and its partitions' rows (id, idx, next_offset, log_start, leader_epoch); None when gone."""
    row = await conn.fetchrow("SELECT id, partitions, configs::text, created_ms FROM kc_topics "
                              "WHERE stream = $1 AND name = $2", path, name)
    if row is None:
        return None
    parts = await conn.fetch(PARTITION_ROWS, row["id"])
    return _topic_info(path, name, row), parts


def _topic_info(path: str, name: str, row: Any) -> TopicInfo:
    """A kc_topics row (id, partitions, configs as text, created_ms) as the store's TopicInfo."""
    return TopicInfo(path, name, row["id"], row["partitions"], json.loads(row["configs"]), row["created_ms"])


async def read_cursors(conn: Any, path: str, group: str) -> dict[tuple[str, int], Cursor]:
    rows = await conn.fetch('SELECT topic, part, "offset", leader_epoch, metadata, commit_ms '
                            "FROM kc_cursors WHERE stream = $1 AND grp = $2", path, group)
    return {(r["topic"], r["part"]): _cursor(r) for r in rows}


async def read_state(conn: Any, path: str, table: str) -> dict[str, Any]:
    rows = await conn.fetch("SELECT key, value::text FROM kc_state WHERE stream = $1 AND tbl = $2", path, table)
    return {r["key"]: json.loads(r["value"]) for r in rows}


# writing --------------------------------------------------------------------------------------

async def write_settings(conn: Any, changes: Mapping[str, str | None]) -> None:
    """Upsert and delete only the keys named (brokers sharing the store write at the same time)."""
    removed = [key for key, value in changes.items() if value is None]
    changed = [(key, value) for key, value in changes.items() if value is not None]
    if removed:
        await conn.execute("DELETE FROM kc_settings WHERE key = ANY($1::text[])", removed)
    if changed:
        await conn.executemany("INSERT INTO kc_settings VALUES ($1, $2) "
                               "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", changed)


async def write_stream(conn: Any, path: str, policy: StreamPolicy, created_ms: int, created: bool) -> None:
    import asyncpg

    if created:
        try:
            await conn.execute("INSERT INTO kc_streams VALUES ($1, $2::jsonb, $3)", path, policy_to_json(policy),
                               created_ms)
        except asyncpg.UniqueViolationError:
            raise StreamExistsError(f"stream {path!r} already exists") from None
    else:
        await conn.execute("UPDATE kc_streams SET policy = $2::jsonb WHERE path = $1", path, policy_to_json(policy))


async def delete_stream(conn: Any, path: str) -> None:
    await conn.execute("DELETE FROM kc_streams WHERE path = $1", path)


async def write_topic(conn: Any, path: str, info: TopicInfo) -> list[Any]:
    """Insert (or grow) a topic and its partitions' rows; returns the partitions' rows."""
    import asyncpg

    try:
        await conn.execute(
            "INSERT INTO kc_topics VALUES ($1, $2, $3, $4, $5::jsonb, $6) ON CONFLICT (id) DO UPDATE "
            "SET partitions = EXCLUDED.partitions, configs = EXCLUDED.configs",
            info.topic_id, path, info.name, info.partitions, json.dumps(info.configs), info.created_ms)
    except asyncpg.UniqueViolationError:
        raise TopicExistsError(f"topic {info.name!r} already exists in stream {path!r}") from None
    await conn.execute("INSERT INTO kc_partitions (topic_id, idx) SELECT $1, i FROM "
                       "generate_series(0, $2 - 1) i ON CONFLICT DO NOTHING", info.topic_id, info.partitions)
    return await conn.fetch(PARTITION_ROWS, info.topic_id)


async def delete_topic(conn: Any, info: TopicInfo) -> None:
    await conn.execute("DELETE FROM kc_topics WHERE id = $1", info.topic_id)


async def write_cursors(conn: Any, path: str, group: str, cursors: Sequence[Cursor],
                        deleted: Sequence[tuple[str, int]]) -> None:
    if cursors:
        await conn.executemany(
            'INSERT INTO kc_cursors VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT '
            '(stream, grp, topic, part) DO UPDATE SET "offset" = EXCLUDED."offset", '
            "leader_epoch = EXCLUDED.leader_epoch, metadata = EXCLUDED.metadata, "
            "commit_ms = EXCLUDED.commit_ms",
            [(path, group, c.topic, c.partition, c.offset, c.leader_epoch, c.metadata,
              c.commit_time_ms) for c in cursors])
    if deleted:
        await conn.executemany("DELETE FROM kc_cursors WHERE stream = $1 AND grp = $2 AND topic = $3 "
                               "AND part = $4", [(path, group, t, p) for t, p in deleted])


async def write_state(conn: Any, path: str, table: str, records: Mapping[str, dict | None]) -> None:
    sets = [(path, table, k, json.dumps(v)) for k, v in records.items() if v is not None]
    gone = [(path, table, k) for k, v in records.items() if v is None]
    if sets:
        await conn.executemany("INSERT INTO kc_state VALUES ($1, $2, $3, $4::jsonb) ON CONFLICT "
                               "(stream, tbl, key) DO UPDATE SET value = EXCLUDED.value", sets)
    if gone:
        await conn.executemany("DELETE FROM kc_state WHERE stream = $1 AND tbl = $2 AND key = $3", gone)


async def leader_epoch_for_share(conn: Any, stream: str, topic: str, index: int) -> int | None:
    """The partition's leader epoch, its row locked FOR SHARE until the transaction ends."""
    return await conn.fetchval("SELECT epoch FROM kc_partition_leaders WHERE stream = $1 AND topic = $2 "
                               "AND partition = $3 FOR SHARE", stream, topic, index)
