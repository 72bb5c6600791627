"""The namespace's rows in PostgreSQL: streams, topics, partitions, cursors and state tables.

The SQL that reads and writes what every broker of a cloud store keeps in
memory as its namespace, apart from the store that keeps that view current
(store.py: when to read, what to forget, whom to notify). Each function runs
on a connection the caller holds, inside the caller's transaction.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..api import Cursor, FsyncPolicy, PermissionEntries, StreamPolicy, TopicInfo
from ..errors import StreamExistsError, TopicExistsError

PARTITION_COLUMNS = "SELECT id, idx, next_offset, log_start, leader_epoch"


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
    by_topic = _by_topic(parts)
    return [(_topic_info(path, r["name"], r), by_topic.get(r["id"], [])) for r in topics]


async def read_named_topics(conn: Any, path: str, names: Sequence[str]) -> dict[str, tuple[TopicInfo, list[Any]]]:
    """Topics of one stream by name, with their partitions' rows (id, idx, next_offset, log_start,
    leader_epoch), in two statements of one snapshot (another broker's
    CreateTopics of a thousand topics sends a thousand notifications); a name gone is left out."""
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        topics = await conn.fetch("SELECT id, name, partitions, configs::text, created_ms FROM kc_topics "
                                  "WHERE stream = $1 AND name = ANY($2::text[])", path, list(names))
        parts = await conn.fetch(f"{PARTITION_COLUMNS}, topic_id FROM kc_partitions WHERE topic_id = ANY($1::uuid[])",
                                 [r["id"] for r in topics])
    by_topic = _by_topic(parts)
    return {r["name"]: (_topic_info(path, r["name"], r), by_topic.get(r["id"], [])) for r in topics}


def _by_topic(parts: Sequence[Any]) -> dict[uuid.UUID, list[Any]]:
    """Partition rows (with their topic_id) grouped by topic id."""
    grouped: dict[uuid.UUID, list[Any]] = {}
    for r in parts:
        grouped.setdefault(r["topic_id"], []).append(r)
    return grouped


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


async def write_topics(conn: Any, path: str, infos: Sequence[TopicInfo]) -> dict[uuid.UUID, list[Any]]:
    """Insert (or grow) topics and their partitions' rows, three statements for any number of topics
    (a CreateTopics of a thousand topics made three thousand round trips); returns each topic's
    partitions' rows by topic id."""
    import asyncpg

    ids = [info.topic_id for info in infos]
    try:
        await conn.execute(
            "INSERT INTO kc_topics SELECT t.id, $2, t.name, t.partitions, t.configs::jsonb, t.created_ms "
            "FROM unnest($1::uuid[], $3::text[], $4::int[], $5::text[], $6::bigint[]) "
            "AS t(id, name, partitions, configs, created_ms) "
            "ON CONFLICT (id) DO UPDATE SET partitions = EXCLUDED.partitions, configs = EXCLUDED.configs",
            ids, path, [i.name for i in infos], [i.partitions for i in infos],
            [json.dumps(i.configs) for i in infos], [i.created_ms for i in infos])
    except asyncpg.UniqueViolationError:
        names = ", ".join(repr(i.name) for i in infos)
        raise TopicExistsError(f"a topic of {names} already exists in stream {path!r}") from None
    await conn.execute("INSERT INTO kc_partitions (topic_id, idx) SELECT t.id, g.i FROM "
                       "unnest($1::uuid[], $2::int[]) AS t(id, n), generate_series(0, t.n - 1) AS g(i) "
                       "ON CONFLICT DO NOTHING", ids, [i.partitions for i in infos])
    rows = _by_topic(await conn.fetch(f"{PARTITION_COLUMNS}, topic_id FROM kc_partitions "
                                      "WHERE topic_id = ANY($1::uuid[])", ids))
    return {topic_id: rows.get(topic_id, []) for topic_id in ids}


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
