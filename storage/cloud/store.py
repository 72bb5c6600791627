"""The cloud engine: metadata in PostgreSQL, partition data as immutable objects in S3.

Any number of processes may open one such store at once (brokers of one
cluster): the database is the single source of truth and assigns offsets;
each process keeps the namespace in memory, as the other engines do, and
keeps it current from PostgreSQL's LISTEN/NOTIFY (channel kc_namespace for
streams, topics, cursors, state tables and settings; kc_data for high
watermarks and log starts). See DESIGN.md beside this file.

This module holds the namespace's view and its persistence, the write
path's commit and log compaction's schedule; the batch index reads are in
index.py, retention and garbage collection in retention.py, the schema and
its migrations in schema.py (SQL in sql/).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any

from ..api import Cursor, StateFence, TopicInfo
from ..compaction import DEFAULT_BACKOFF_MS, DEFAULT_DEDUPE_BUFFER_BYTES, CleanResult, RecordCodec, cleaner_loop
from ..errors import NotLeaderError, StorageError, StreamExistsError, TopicExistsError
from ..namespace import NamespaceStore, StreamState, TopicState, now_ms
from ..partition_base import RecordTimestamps
from . import catalog, schema
from .cleaner import clean_partition
from .index import BatchIndex
from .objects import BatchCache, ObjectStore
from .outage import database_errors, database_step, retriable_database_errors, unavailable_error
from .partition import CloudPartition
from .retention import Retention
from .statistics import TableStatistics
from .stream_writes import StreamWrites
from .writer import Writer

log = logging.getLogger(__name__)

STOP_ATTEMPTS = 10  # times a background loop is cancelled, a second apart, before the store closes without it
COMMIT_ATTEMPTS = 4  # while no kc_commit statement went out, nothing is stored: the write fails soon
# Once one went out and its answer was lost, it may have been applied, and only a repeat (which
# returns the first call's offsets) tells: repeated, while the database is out of reach, for up
# to this long. Given up after four quick attempts, such a batch was answered KAFKA_STORAGE_ERROR
# though stored, and an idempotent producer's retry was stored again. The produce is answered
# REQUEST_TIMED_OUT meanwhile (90% of its timeout), and its retry waits for this outcome.
COMMIT_RETRY_S = 30.0


def _commit_retriable() -> tuple[type[BaseException], ...]:
    """retriable_database_errors, and a database refusing connections (restarting, or connections
    disallowed): no statement was sent, so a repeat is safe."""
    import asyncpg

    return (*retriable_database_errors(), asyncpg.ObjectNotInPrerequisiteStateError)

async def _keep_session(conn: Any) -> None:
    """What the pool sends before lending a connection again: nothing. asyncpg's default reset
    (unlock advisory locks, close cursors, unlisten, reset settings) is a round trip on every
    release, so on every commit of the produce path. The store leaves none of that in a session:
    settings are set per transaction (set_config(..., true)), LISTEN has a connection of its own,
    and the retention pass unlocks its lock or closes the connection. asyncpg still rolls back a
    transaction left open."""


def _runs_of_topics(events: Sequence[tuple[str, str]]) -> Iterator[tuple[str, str, list[str]]]:
    """The events in order, as (kind, payload, topic names): a run of "topic" events of one stream
    becomes its first event with every name of the run."""
    run: tuple[str, str, list[str]] | None = None
    run_stream = None
    for kind, payload in events:
        event = json.loads(payload) if kind == "topic" else None
        if run is not None and event is not None and event["s"] == run_stream:
            run[2].append(event["t"])
            continue
        if run is not None:
            yield run
            run = None
        if event is not None:
            run, run_stream = (kind, payload, [event["t"]]), event["s"]
        else:
            yield kind, payload, []
    if run is not None:
        yield run


# The leader epoch under which this process may clean a partition (stream, topic, index):
# -1 to clean without fencing, None to leave it to another broker.
CleanerFence = Callable[[str, str, int], int | None]


def _clean_everything(stream: str, topic: str, index: int) -> int | None:
    return -1


class CloudStore(NamespaceStore):
    """A store shared by brokers: `postgresql://...` for metadata, `s3://bucket/prefix` for data."""

    # Other brokers' topics come and go through _sync_topic and _forget_topic, which keep the running
    # count too: walking every topic at each CreateTopics made creating N topics cost N² (issue 32:
    # a 1,000-topic request took over a minute at 10,000 topics)
    counts_partitions = True

    def __init__(
        self,
        database_url: str,
        object_store_url: str,
        default_stream: str = "/default",
        record_timestamps: RecordTimestamps | None = None,
        *,
        flush_ms: int = 10,
        flush_bytes: int = 4 << 20,
        cache_bytes: int = 64 << 20,
        retention_check_ms: int = 60_000,
        object_grace_ms: int = 600_000,
        record_codec: RecordCodec | None = None,
        cleaner_dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES,
        cleaner_backoff_ms: int = DEFAULT_BACKOFF_MS,
    ) -> None:
        super().__init__(default_stream)
        self.database_url = database_url
        self.objects = ObjectStore(object_store_url)
        self.record_timestamps = record_timestamps
        self.cache = BatchCache(cache_bytes)
        self.retention_check_ms = retention_check_ms
        self.object_grace_ms = object_grace_ms
        self.record_codec = record_codec  # without it compacted topics are never cleaned
        self.cleaner_dedupe_buffer_bytes = cleaner_dedupe_buffer_bytes
        self.cleaner_backoff_ms = cleaner_backoff_ms
        # Set by the broker in a cluster: only a partition's leader cleans it (cleaner.py).
        self.cleaner_fence: CleanerFence = _clean_everything
        self.origin = uuid.uuid4().hex[:12]  # this process, in NOTIFY payloads
        self.index = BatchIndex(lambda: self._pool, self.objects, self.cache, self.origin)
        self.retention = Retention(self.index, self._log_start_moved)
        self.object_keys = self.index.object_keys  # object id -> key, as read or written
        self.epoch = 0
        self.writer = Writer(self.objects.put, self.objects.new_key, self._commit, flush_ms, flush_bytes)
        self._pool: Any = None
        self._listener: Any = None
        self._rows: dict[tuple[str, int], list[int]] = {}  # (topic id hex, index) -> [pid, next, start, epoch]
        self._row_by_pid: dict[int, list[int]] = {}  # the same rows by partition id
        self._by_pid: dict[int, CloudPartition] = {}
        self._unborn: dict[tuple[str, int], CloudPartition] = {}  # opened while their topic's rows were being written
        self._events: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        # Reads of kc_settings take turns with writes, so an older read never replaces a newer view
        self._settings_turn = asyncio.Lock()
        # this process's writes of each stream's cursors and state tables: a read of them from the
        # database replaces the view only when none of those landed while it ran
        self._stream_writes = StreamWrites()
        self._tasks: list[asyncio.Task] = []
        self._announcing: set[asyncio.Task] = set()  # commits' notifications on their way, and ANALYZEs
        self.statistics = TableStatistics("kc_topics", "kc_partitions")

    def data_dirs(self) -> list[str]:
        return [self.objects.url]

    # open / close ----------------------------------------------------------------

    async def open(self) -> None:
        import asyncpg

        try:
            # min_size 0: connections are made as they are needed and kept while used; with a floor,
            # asyncpg logs a traceback every few seconds of a database outage while restoring it
            self._pool = await asyncpg.create_pool(self.database_url, min_size=0, max_size=10,
                                                   command_timeout=60, reset=_keep_session)
        except (OSError, asyncpg.PostgresError, asyncio.TimeoutError) as exc:
            raise StorageError(f"cannot connect to the database {self.database_url}: {exc}") from exc
        try:
            await self.objects.open()
            await self._migrate()
            await self._listen()
            await self._load_all()
            try:
                await self._ensure_default_stream()
            except StreamExistsError:  # another broker created it just now
                await self._sync_stream(self.default_stream)
        except database_errors() as exc:
            await self._release()
            raise StorageError(f"cannot open the store in {self.database_url}: {exc}") from exc
        except BaseException:
            await self._release()
            raise
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._apply_events()), loop.create_task(self._retention_loop())]
        if self.record_codec is not None:
            self._tasks.append(loop.create_task(cleaner_loop(self.clean_logs, self.cleaner_backoff_ms)))

    async def close(self) -> None:
        await self.writer.close()
        await asyncio.gather(*self._announcing, return_exceptions=True)
        await _stop_tasks(self._tasks)
        for part in self._opened_partitions():
            part._wake()
        await self._release()

    async def _release(self) -> None:
        if self._listener is not None:
            try:
                await self._listener.close(timeout=5)
            except Exception:  # noqa: BLE001 - closing anyway
                self._listener.terminate()
            self._listener = None
        if self._pool is not None:
            try:
                await asyncio.wait_for(self._pool.close(), 10)
            except Exception:  # noqa: BLE001
                self._pool.terminate()
            self._pool = None
        await self.objects.close()

    async def _migrate(self) -> None:
        self.store_id, self.epoch = await schema.migrate(self._pool)

    async def _listen(self) -> None:
        import asyncpg

        self._listener = await asyncpg.connect(self.database_url)
        await self._listener.add_listener(schema.DATA_CHANNEL, self._on_data)
        await self._listener.add_listener(schema.NAMESPACE_CHANNEL, self._on_namespace)
        await self._listener.add_listener(schema.CLEANED_CHANNEL, self._on_cleaned)
        self._listener.add_termination_listener(self._on_listener_lost)

    def _on_listener_lost(self, _conn: Any) -> None:
        if self._pool is not None:
            self._events.put_nowait(("reconnect", ""))

    # namespace loading -------------------------------------------------------------------

    async def _load_all(self) -> None:
        async with self._pool.acquire() as conn:
            await self._read_settings(conn)
            paths = await catalog.stream_paths(conn)
        for path in paths:
            await self._sync_stream(path)
        for path in [p for p in self._streams if p not in paths]:
            self._forget_stream(path)

    async def _sync_stream(self, path: str) -> None:
        """Make this process's view of one stream match the database."""
        async with self._pool.acquire() as conn:
            found = await catalog.read_stream(conn, path)
            if found is None:
                self._forget_stream(path)
                return
            policy, created_ms = found
            stream = self._streams.get(path)
            if stream is None or stream.created_ms != created_ms:
                if stream is not None:
                    self._forget_stream(path)
                stream = StreamState(path, policy, created_ms)
                self._add_loaded_stream(stream)
            else:
                stream.policy = policy
                for topic in stream.topics.values():
                    topic.forget_settings()
            contents = await self._stream_writes.read(path, lambda: catalog.read_stream_contents(conn, path))
            stream.cursors = contents.cursors
            for name in set(stream.tables) | set(contents.tables):
                stream.replace_table(name, contents.tables.get(name, {}))
            topics = await catalog.read_topics(conn, path)
        for info, parts in topics:
            self._take_topic(stream, info, parts)
        names = {info.name for info, _ in topics}
        for name in [n for n in stream.topics if n not in names]:
            self._forget_topic(stream, name)

    async def _sync_topic(self, path: str, name: str) -> None:
        await self._sync_topics(path, [name])

    async def _sync_topics(self, path: str, names: Sequence[str]) -> None:
        stream = self._streams.get(path)
        if stream is None:
            return
        async with self._pool.acquire() as conn:
            found = await catalog.read_named_topics(conn, path, names)
        for name in dict.fromkeys(names):
            if name in found:
                self._take_topic(stream, *found[name])
            elif name in stream.topics:
                self._forget_topic(stream, name)

    def _take_topic(self, stream: StreamState, info: TopicInfo, parts: Sequence[Any]) -> None:
        """This process's view of one topic as read from the database: new, replaced (deleted and
        created again under the same name) or brought up to date."""
        local = stream.topics.get(info.name)
        if local is not None and local.id_hex != info.topic_id.hex:
            self._forget_topic(stream, info.name)
            local = None
        if local is None:
            local = TopicState(stream, info)
            self._register_topic(stream, local)
        else:
            self._count_partitions(info.partitions - local.partition_total)
            local.info = info
            local.forget_settings()
        self._note_rows(local.id_hex, parts)

    def _note_rows(self, topic_hex: str, rows: Sequence[Any]) -> None:
        for r in rows:
            row = [r["id"], r["next_offset"], r["log_start"], r["leader_epoch"]]
            self._rows[(topic_hex, r["idx"])] = self._row_by_pid[r["id"]] = row
            unborn = self._unborn.pop((topic_hex, r["idx"]), None)
            if unborn is not None:
                unborn.pid = r["id"]
                self._by_pid[unborn.pid] = unborn
            part = self._by_pid.get(r["id"])
            if part is not None:
                part.moved(r["next_offset"], r["log_start"], r["leader_epoch"])

    def _forget_stream(self, path: str) -> None:
        stream = self._streams.pop(path, None)
        if stream is None:
            return
        for name in list(stream.topics):
            self._forget_topic(stream, name)

    def _forget_topic(self, stream: StreamState, name: str) -> None:
        topic = stream.topics.pop(name, None)
        if topic is not None:
            self._count_partitions(-topic.partition_total)
            self._drop_topic_state(topic)

    def _drop_topic_state(self, topic: TopicState) -> None:
        """Close the topic's partitions (releasing pollers) and forget its rows."""
        self._topics_by_id.pop(topic.id_hex, None)
        for part in (topic.partitions or {}).values():
            self._by_pid.pop(part.pid, None)
            part._mark_closed()
        for key in [k for k in self._unborn if k[0] == topic.id_hex]:
            self._unborn.pop(key)._mark_closed()
        for key in [k for k in self._rows if k[0] == topic.id_hex]:
            self._row_by_pid.pop(self._rows.pop(key)[0], None)

    # notifications --------------------------------------------------------------------------

    def _on_data(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        origin, _, body = payload.partition(" ")
        if origin == self.origin:
            return
        if body == "*":
            self._events.put_nowait(("refresh", ""))
            return
        for item in body.split(","):
            pid, nxt, start, epoch = (int(x) for x in item.split(":"))
            part = self._by_pid.get(pid)
            if part is not None:
                part.moved(nxt, start, epoch)
            row = self._row_by_pid.get(pid)
            if row is not None:  # a partition opened later starts from here
                row[1:] = [max(row[1], nxt), max(row[2], start), max(row[3], epoch)]

    def _on_cleaned(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        origin, _, body = payload.partition(" ")
        pid, below = (int(x) for x in body.split(":"))
        part = self._by_pid.get(pid)
        if origin != self.origin and part is not None:
            part.cleaned(below)

    def _on_namespace(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        event = json.loads(payload)
        if event["o"] != self.origin:
            self._events.put_nowait((event["k"], payload))

    async def _apply_events(self) -> None:
        """Apply other brokers' namespace changes in the order they were committed; consecutive topic
        changes of one stream waiting together are read in one go (another broker's CreateTopics of
        a thousand topics is a thousand notifications: read one by one, two thousand round trips)."""
        while True:
            events = [await self._events.get()]
            while not self._events.empty():
                events.append(self._events.get_nowait())
            for kind, payload, names in _runs_of_topics(events):
                await self._apply_event(kind, payload, names)

    async def _apply_event(self, kind: str, payload: str, names: list[str]) -> None:
        try:
            if kind == "reconnect":
                await self._reconnect()
            elif kind == "refresh":
                await self._refresh_rows()
            elif kind == "settings":
                async with self._pool.acquire() as conn:
                    await self._read_settings(conn)
            elif kind == "stream":
                await self._sync_stream(json.loads(payload)["s"])
            elif kind == "topic":
                await self._sync_topics(json.loads(payload)["s"], names)
            elif kind in ("cursors", "state"):
                event = json.loads(payload)
                await self._sync_small(kind, event["s"], event["g"])
        except database_errors() as exc:  # an outage: reload once the database answers again
            log.warning("cannot read a change from another broker (%s: %s); reloading the namespace",
                        type(exc).__name__, exc)
            await asyncio.sleep(1)
            self._events.put_nowait(("reconnect", ""))
        except Exception:  # noqa: BLE001 - one bad event must not stop the rest
            log.exception("applying a change from another broker failed; reloading the namespace")
            await asyncio.sleep(1)
            self._events.put_nowait(("reconnect", ""))

    async def _reconnect(self) -> None:
        """The notification connection broke: listen again, then reload what may have been missed."""
        while True:
            try:
                if self._listener is not None:
                    self._listener.terminate()
                await self._listen()
                break
            except Exception as exc:  # noqa: BLE001
                log.warning("cannot listen for changes from other brokers (%s); retrying", exc)
                await asyncio.sleep(1)
        await self._load_all()
        await self._refresh_rows()
        for part in self._by_pid.values():  # a cleaning may have been missed: read the index afresh
            part.cleaned(part.high_watermark + 1)

    async def _refresh_rows(self) -> None:
        """Every partition's offsets from the database (after a '*' notification or a reconnect)."""
        self._apply_rows(await self.index.fetch("SELECT id, next_offset, log_start, leader_epoch FROM kc_partitions"))

    def _apply_rows(self, rows: Sequence[Any]) -> None:
        """Partitions' offsets as just read: into their open partitions, and into the rows a partition
        opened later starts from."""
        for r in rows:
            row = self._row_by_pid.get(r["id"])
            if row is not None:
                row[1:] = [max(row[1], r["next_offset"]), max(row[2], r["log_start"]), max(row[3], r["leader_epoch"])]
            part = self._by_pid.get(r["id"])
            if part is not None:
                part.moved(r["next_offset"], r["log_start"], r["leader_epoch"])

    async def _sync_small(self, kind: str, path: str, name: str) -> None:
        stream = self._streams.get(path)
        if stream is None:
            return
        async with self._pool.acquire() as conn:
            if kind == "cursors":
                table = await self._stream_writes.read(path, lambda: catalog.read_cursors(conn, path, name))
                if table:
                    stream.cursors[name] = table
                else:
                    stream.cursors.pop(name, None)
            else:
                stream.replace_table(name, await self._stream_writes.read(path, lambda: catalog.read_state(conn, path, name)))

    async def reload_state(self, stream: str, table: str) -> None:
        """The table as the database holds it now, without waiting for a notification under way
        (a broker taking over another's groups reads what that broker last wrote)."""
        with database_step(f"reading state table {table} of {stream}"):
            await self._sync_small("state", stream, table)

    async def _notify(self, conn: Any, kind: str, **fields: str) -> None:
        await conn.execute("SELECT pg_notify($1, $2)", schema.NAMESPACE_CHANNEL,
                           json.dumps({"o": self.origin, "k": kind, **fields}))

    async def _notify_each(self, conn: Any, kind: str, payloads: Sequence[Mapping[str, str]]) -> None:
        """One notification per payload, in one statement."""
        await conn.execute("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", schema.NAMESPACE_CHANNEL,
                           [json.dumps({"o": self.origin, "k": kind, **fields}) for fields in payloads])

    # namespace hooks ------------------------------------------------------------------

    async def _read_settings(self, conn: Any) -> None:
        """This process's view of the settings, as the database holds them now."""
        async with self._settings_turn:
            self._take_settings(await catalog.read_settings(conn))

    async def set_settings(self, changes: Mapping[str, str | None]) -> dict[str, str]:
        """Upsert and delete only the keys named, then take the view from the database.

        Brokers sharing the store set settings at the same time (each
        records the cluster name on its first start). Writing a whole table
        from this broker's view would lose the other's keys; and taking the
        local view as the result would, when the other's notification was
        read before this commit, hide the other's keys until the next change.
        So the keys are written one by one and the view is read back in the
        same turn as every other read of the table (`_read_settings`), in the
        order the reads were made.
        """
        with database_step("writing settings"):
            async with self._pool.acquire() as conn:
                async with conn.transaction():
                    await catalog.write_settings(conn, changes)
                    await self._notify(conn, "settings")
                await self._read_settings(conn)
        return dict(self._settings)

    async def _persist_settings(self, settings: dict[str, str]) -> None:
        raise NotImplementedError("set_settings writes the changed keys itself")  # pragma: no cover

    async def _persist_stream(self, stream: StreamState, created: bool) -> None:
        with database_step(f"writing stream {stream.path}"):
            async with self._pool.acquire() as conn, conn.transaction():
                await catalog.write_stream(conn, stream.path, stream.policy, stream.created_ms, created)
                await self._notify(conn, "stream", s=stream.path)

    async def _persist_stream_deleted(self, stream: StreamState) -> None:
        try:
            with database_step(f"deleting stream {stream.path}"):
                async with self._pool.acquire() as conn, conn.transaction():
                    await catalog.delete_stream(conn, stream.path)
                    await self._notify(conn, "stream", s=stream.path)
        except StorageError:  # the database still holds the stream: keep serving it
            restored = self._streams.setdefault(stream.path, stream) is stream
            for topic in stream.topics.values():
                self._topics_by_id.setdefault(topic.id_hex, topic)
                if restored:  # counted out by delete_stream
                    self._count_partitions(topic.partition_total)
            raise
        for name in list(stream.topics):  # counted out already, by delete_stream
            self._drop_topic_state(stream.topics.pop(name))

    async def create_topic(
        self, stream: str, name: str, partitions: int, configs: dict[str, str] | None = None
    ) -> TopicInfo:
        """As every engine creates one; when another broker created the name first, its topic is
        read now, not at its notification: the caller's next get_topic finds it (brokers race to
        create __consumer_offsets, and a broker whose view lacked it took over no groups).

        A conflict with a create still under way in this process is not read back: its row is
        not committed yet, and reading "no row" would forget the winner's registration."""
        state = self._streams.get(stream)
        known_here = state is not None and name in state.topics
        try:
            return await super().create_topic(stream, name, partitions, configs)
        except TopicExistsError:
            if known_here:
                raise
            with contextlib.suppress(*database_errors()):
                await self._sync_topic(stream, name)  # unreadable now: its notification still brings it
            raise

    async def _persist_topics(self, stream: StreamState, topics: Sequence[TopicState]) -> None:
        with database_step(f"writing topics of {stream.path}"):
            async with self._pool.acquire() as conn, conn.transaction():
                rows = await catalog.write_topics(conn, stream.path, [topic.info for topic in topics])
                await self._notify_each(conn, "topic", [{"s": stream.path, "t": topic.info.name} for topic in topics])
        for topic in topics:
            self._note_rows(topic.id_hex, rows[topic.info.topic_id])
        if self.statistics.added(sum(topic.info.partitions for topic in topics), self.partition_count()):
            self._in_background(self._analyze())

    async def _analyze(self) -> None:
        """The namespace tables' statistics refreshed (statistics.py), after the topics were answered."""
        pool = self._pool
        if pool is None:
            return
        try:
            async with pool.acquire() as conn:
                await self.statistics.analyze(conn)
        except database_errors() as exc:  # autovacuum's analysis comes later
            log.debug("analyzing the namespace tables failed: %s", exc)

    def _in_background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._announcing.add(task)
        task.add_done_callback(self._announcing.discard)

    async def _persist_topic_deleted(self, stream: StreamState, topic: TopicState) -> None:
        try:
            with database_step(f"deleting topic {topic.name} of {stream.path}"):
                async with self._pool.acquire() as conn, conn.transaction():
                    await catalog.delete_topic(conn, topic.info)
                    await self._notify(conn, "topic", s=stream.path, t=topic.name)
        except StorageError:  # the database still holds the topic: keep serving it
            if topic.name not in stream.topics:
                self._register_topic(stream, topic)
            raise
        self._drop_topic_state(topic)

    async def _persist_cursors(
        self, stream: StreamState, group: str, cursors: Sequence[Cursor], deleted: Sequence[tuple[str, int]],
        fence: StateFence | None = None,
    ) -> None:
        with database_step(f"writing offsets of group {group} in {stream.path}"):
            async with self._pool.acquire() as conn, self._stream_writes.writing(stream.path), conn.transaction():
                if fence is not None:
                    await _check_fence(conn, fence, "offsets")
                await catalog.write_cursors(conn, stream.path, group, cursors, deleted)
                await self._notify(conn, "cursors", s=stream.path, g=group)

    async def _persist_state(
        self, stream: StreamState, table: str, records: Mapping[str, dict | None], durable: bool
    ) -> None:
        with database_step(f"writing state table {table} of {stream.path}"):
            async with self._pool.acquire() as conn, self._stream_writes.writing(stream.path), conn.transaction():
                await self._write_state(conn, stream, table, records)

    async def _persist_fenced_state(
        self, stream: StreamState, table: str, records: Mapping[str, dict | None], durable: bool, fence: StateFence
    ) -> None:
        """The write, in one transaction with a FOR SHARE read of the partition's leader row (as
        kc_commit fences appends): a move of leadership either commits first, and the write is
        refused, or waits until it is done, and the new leader reads what it wrote."""
        with database_step(f"writing state table {table} of {stream.path}"):
            async with self._pool.acquire() as conn, self._stream_writes.writing(stream.path), conn.transaction():
                await _check_fence(conn, fence, "state")
                await self._write_state(conn, stream, table, records)

    async def _persist_fenced_cursors(
        self, stream: StreamState, group: str, cursors: Sequence[Cursor], deleted: Sequence[tuple[str, int]],
        fence: StateFence,
    ) -> None:
        """The offsets, fenced as _persist_fenced_state fences state: a deposed group coordinator's
        late commit (or delete) is refused rather than landing after its successor's commit."""
        await self._persist_cursors(stream, group, cursors, deleted, fence)

    async def _write_state(self, conn: Any, stream: StreamState, table: str,
                           records: Mapping[str, dict | None]) -> None:
        await catalog.write_state(conn, stream.path, table, records)
        await self._notify(conn, "state", s=stream.path, g=table)

    async def _purge_topic(self, stream: StreamState, topic: TopicState) -> None:
        with database_step(f"purging topic {topic.name} of {stream.path}"):
            async with self._pool.acquire() as conn:
                rows = await conn.fetch("SELECT p.id, kc_advance_start($1, p.id, p.next_offset) AS start, "
                                        "p.next_offset FROM kc_partitions p WHERE p.topic_id = $2", self.origin,
                                        topic.info.topic_id)
        for r in rows:
            part = self._by_pid.get(r["id"])
            if part is not None:
                part.moved(r["next_offset"], r["start"], 0)

    def _new_partition(self, topic: TopicState, index: int) -> CloudPartition:
        row = self._rows.get((topic.id_hex, index))
        if row is None:  # its topic is being created by this process: empty until the rows are written
            part = self._unborn[(topic.id_hex, index)] = CloudPartition(self, topic, index, [-1, 0, 0, 0])
            return part
        part = CloudPartition(self, topic, index, row)
        self._by_pid[part.pid] = part
        return part

    # the data path --------------------------------------------------------------------------

    async def _commit(self, key: str, size: int, pids: list[int], counts: list[int], positions: list[int],
                      lengths: list[int], max_ts: list[int], fences: list[int], segment_bytes: list[int] | None = None,
                      segment_ms: list[int] | None = None, at: list[int] | None = None,
                      guards: list[int] | None = None, heads: list[bytes | None] | None = None,
                      since: list[int] | None = None) -> list[tuple[int, int, int, int]]:
        """kc_commit, retried on a lost connection (a repeat returns the first call's offsets):
        (object id, base offset, epoch, next offset) per batch. `segment_bytes` and `segment_ms`
        roll compacted partitions' segments, `at` states the offset a batch must get (-1: none),
        `guards` the partition whose leader epoch a batch's fence names (-1: its own), `heads` what the
        index keeps of each batch for the tail scan of a new leader (`batch_head`), `since` the offset from
        which no marker of a transactional batch's producer may be stored (-1: none)."""
        unset = [-1] * len(pids)
        sent = False  # a statement went out: its outcome is unknown until a repeat answers
        deadline = time.monotonic() + COMMIT_RETRY_S
        attempt = 0
        while True:
            try:
                async with self._pool.acquire() as conn:
                    sent = True
                    rows = await conn.fetch(
                        "SELECT * FROM kc_commit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,"
                        " $16, false)", self.origin, key, size, self.epoch, pids, counts, positions, lengths, max_ts,
                        fences, segment_bytes or unset, segment_ms or unset, at or unset, guards or unset,
                        heads or [None] * len(pids), since or unset)
                self._announce(sorted(set(pids)))
                return [(r["object_id"], r["base"], r["epoch"], r["hw"]) for r in rows]
            except (_commit_retriable() if sent else retriable_database_errors()) as exc:
                attempt += 1
                if (time.monotonic() >= deadline) if sent else attempt == COMMIT_ATTEMPTS:
                    raise unavailable_error(f"committing {key}", exc) from exc
                log.debug("committing %s failed (%s); retrying", key, exc)  # the last failure is logged
                await asyncio.sleep(min(0.05 * 2 ** (attempt - 1), 1.0))
            except database_errors() as exc:
                raise unavailable_error(f"committing {key}", exc) from exc

    def _announce(self, pids: list[int]) -> None:
        """Tell the other brokers that these partitions moved, after the commit and not in its
        transaction (kc_commit's p_notify): the acknowledgement does not wait for it, and the
        brokers' commits do not queue on PostgreSQL's notify lock."""
        self._in_background(self._send_announcement(pids))

    async def _send_announcement(self, pids: list[int]) -> None:
        pool = self._pool
        if pool is None:
            return  # closed: the others re-read when they next need these partitions
        try:
            async with pool.acquire() as conn:
                await conn.execute("SELECT kc_notify_partitions($1, $2, true)", self.origin, pids)
        except (*database_errors(), OSError) as exc:  # late, not lost: readers re-read on reconnect or a move
            log.debug("announcing partitions %s failed: %s", pids, exc)

    async def refresh_many(self, keys: Sequence[tuple[str, str, int]]) -> None:
        """One statement for all; a partition not open here is not opened (a broker starting as the leader
        of 100,000 partitions made 100,000 objects for it): its row is brought up to date instead."""
        pids = []
        for stream, name, index in keys:
            try:
                row = self._rows.get((self._topic(stream, name).id_hex, index))
            except StorageError:  # unknown here: nothing stale to refresh
                continue
            if row is not None:
                pids.append(row[0])
        await self._refresh_pids(pids)

    async def refresh_partitions(self, parts: list[CloudPartition]) -> None:
        """Read the partitions' offsets from the database (after a missed notification, or before an error)."""
        await self._refresh_pids([p.pid for p in parts])

    async def _refresh_pids(self, pids: list[int]) -> None:
        if pids:
            self._apply_rows(await self.index.fetch("SELECT id, next_offset, log_start, leader_epoch FROM kc_partitions "
                                                    "WHERE id = ANY($1)", pids))

    # log compaction -------------------------------------------------------------------------

    async def clean_logs(self, now: int | None = None) -> list[CleanResult]:
        """Clean every compacted partition this process may clean (its leader: `cleaner_fence`) whose
        cleaning is due (cleaner.py). Runs every `cleaner_backoff_ms`; tests and benchmarks call it."""
        if self.record_codec is None:
            return []
        results = []
        for stream in list(self._streams.values()):
            for topic in list(stream.topics.values()):
                if not topic.settings.compact:
                    continue
                for index in range(topic.info.partitions):
                    fence = self.cleaner_fence(stream.path, topic.name, index)
                    if fence is None or (topic.id_hex, index) not in self._rows:
                        continue
                    try:
                        part = self.partition(stream.path, topic.name, index)
                        result = await clean_partition(self, part, fence, now)
                    except (StorageError, *database_errors()) as exc:
                        log.warning("%s:%s/%d: not cleaned this pass: %s", stream.path, topic.name, index, exc)
                        continue
                    if result is not None:
                        results.append(result)
        return results

    # retention and garbage collection -----------------------------------------------------

    async def _retention_loop(self) -> None:
        while True:
            await asyncio.sleep(self.retention_check_ms / 1000)
            try:
                await self.enforce_retention()
            except StorageError:  # the database or the object store is away (logged): the next pass tries again
                pass
            except Exception:  # noqa: BLE001 - next pass tries again
                log.exception("retention pass failed")

    async def enforce_retention(self, now: int | None = None) -> int:
        """Move log starts past expired or over-size batches, then delete objects nothing refers to.

        Every broker runs this every `retention_check_ms`; an advisory lock
        lets one of them do a pass at a time. Returns how many partitions moved.
        """
        now = now_ms() if now is None else now
        self.activity.retention_passes += 1
        return await self.retention.run(self._retained(now), now, self.object_grace_ms)

    def _retained(self, now: int) -> Iterator[tuple[int, int | None, int | None]]:
        """(partition id, cutoff timestamp, size cap) of every open partition of a topic with retention,
        as the pass reaches it (the namespace may change while it runs)."""
        for stream in list(self._streams.values()):
            for topic in list(stream.topics.values()):
                settings = topic.settings
                if not settings.retains:
                    continue
                cutoff = now - settings.ttl_ms if settings.ttl_ms >= 0 else None
                cap = settings.retention_bytes if settings.retention_bytes >= 0 else None
                for index in range(topic.info.partitions):
                    row = self._rows.get((topic.id_hex, index))
                    if row is not None:
                        yield row[0], cutoff, cap

    def _log_start_moved(self, pid: int, next_offset: int, log_start: int) -> None:
        part = self._by_pid.get(pid)
        if part is not None:
            part.moved(next_offset, log_start, 0)


async def _stop_tasks(tasks: list[asyncio.Task]) -> None:
    """Cancel the store's background loops and wait for them to end. A loop whose pass turned the
    cancellation into an error (a cleanup in a `finally` failing on the connection the cancellation cut:
    that error replaces the CancelledError) takes it for a failed pass and sleeps until the next, so a
    loop still running a moment after is cancelled again: a broker stopping on SIGTERM waited a whole
    retention interval (60 s) for one."""
    pending = {task for task in tasks if not task.done()}
    for _attempt in range(STOP_ATTEMPTS):
        if not pending:
            return
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=1.0)
    log.warning("%d background task(s) of the store did not stop: %s", len(pending), pending)


async def _check_fence(conn: Any, fence: StateFence, what: str) -> None:
    """NotLeaderError unless the fence's leader epoch is still its partition's, read FOR SHARE in
    the caller's transaction so a move of leadership waits for the write or refuses it."""
    fenced_stream, topic, index, epoch = fence
    lead = await catalog.leader_epoch_for_share(conn, fenced_stream, topic, index)
    if lead != epoch:
        raise NotLeaderError(f"{fenced_stream}:{topic}/{index}: leader epoch {epoch} was superseded by "
                             f"{lead}; {what} not written", -1 if lead is None else lead)
