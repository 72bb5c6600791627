"""The on-disk store: the namespace as directories, metadata as small files.

Per stream (on the first volume): `.stream` holds the policy (replaced
atomically), `.topics` is the topic catalog and `.cursors` the cursor log,
both append-only JSON lines replayed on open and compacted when mostly
stale; a stream with a million topics thus opens from one file. Partitions
open lazily on first use and create their directories on first append, and
open file descriptors are bounded by an LRU.

`store.json` counts opens: the count is the leader epoch stamped into every
batch, so epochs never go down across restarts. `.clean` marks a clean
shutdown; without it, partitions validate their logs past the last
checkpoint as they are opened.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import gc
import json
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence

from ..api import Cursor, FsyncPolicy, PermissionEntries, StreamPolicy
from ..errors import StorageError
from ..compaction import RecordCodec
from ..namespace import NamespaceStore, Settings, StreamState, TopicState, now_ms
from ..partition_base import RecordTimestamps
from . import layout
from .catalog import JsonLog
from .cleaner import DEFAULT_BACKOFF_MS, DEFAULT_DEDUPE_BUFFER_BYTES, CleanResult, clean_partition
from .files import empty_trash, fsync_dir, make_dirs, move_to_trash, write_atomic
from .handles import FileHandles
from .partition import DiskPartition
from .volumes import Volume

log = logging.getLogger(__name__)

_COMPACT_SLACK = 10_000  # stale lines tolerated before a running compaction


class DiskStore(NamespaceStore):
    def __init__(
        self,
        volumes: Sequence[str],
        default_stream: str = "/default",
        record_timestamps: RecordTimestamps | None = None,
        *,
        max_open_files: int = 1024,
        volume_limits: Mapping[str, int] | None = None,
        retention_check_ms: int = 60_000,
        record_codec: RecordCodec | None = None,
        cleaner_dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES,
        cleaner_backoff_ms: int = DEFAULT_BACKOFF_MS,
    ) -> None:
        super().__init__(default_stream)
        if not volumes:
            raise ValueError("the on-disk store needs at least one data directory")
        limits = {os.path.abspath(k): v for k, v in (volume_limits or {}).items()}
        self.volumes = [Volume(path, limits.get(os.path.abspath(path))) for path in volumes]
        self._by_id: dict[str, Volume] = {}
        self.record_timestamps = record_timestamps
        self.handles = FileHandles(max_open_files)
        self.retention_check_ms = retention_check_ms
        self.record_codec = record_codec  # without it compacted topics are never cleaned
        self.cleaner_dedupe_buffer_bytes = cleaner_dedupe_buffer_bytes
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self._cleaner_task: asyncio.Task | None = None
        self.epoch = 0
        self.clean = True
        self._topic_logs: dict[str, JsonLog] = {}
        self._cursor_logs: dict[str, JsonLog] = {}
        self._background: set[asyncio.Task] = set()
        self._retention_task: asyncio.Task | None = None
        self._lock_fd: int | None = None

    @property
    def root(self) -> str:
        return self.volumes[0].path

    def volume(self, volume_id: str) -> Volume:
        try:
            return self._by_id[volume_id]
        except KeyError:
            raise StorageError(f"data lives on volume {volume_id!r}, which is not configured") from None

    # open / close --------------------------------------------------------------

    async def open(self) -> None:
        await asyncio.to_thread(self._open_files)
        await asyncio.to_thread(self._load_namespace)  # nothing else uses the store yet
        await self._ensure_default_stream()
        self._spawn(asyncio.to_thread(self._empty_trash))
        self._retention_task = asyncio.get_running_loop().create_task(self._retention_loop())
        if self.record_codec is not None:
            self._cleaner_task = asyncio.get_running_loop().create_task(self._cleaner_loop())

    def _open_files(self) -> None:
        self._lock_data_dir()
        for volume in self.volumes:
            volume.open()
            if volume.id in self._by_id:
                raise StorageError(f"{volume.path} and {self._by_id[volume.id].path} are the same volume")
            self._by_id[volume.id] = volume
        store_file = os.path.join(self.root, layout.STORE_FILE)
        marker = os.path.join(self.root, layout.CLEAN_MARKER)
        try:
            with open(store_file, "rb") as f:
                state = json.loads(f.read())
            self.clean = os.path.exists(marker)
        except FileNotFoundError:
            state = {"epoch": 0}
        self.epoch = state["epoch"] + 1
        write_atomic(store_file, json.dumps({"epoch": self.epoch}).encode())
        if os.path.exists(marker):
            os.unlink(marker)
            fsync_dir(self.root)
        if not self.clean:
            log.warning("%s was not shut down cleanly; partitions are validated as they open", self.root)

    def _lock_data_dir(self) -> None:
        """One store per data dir: a second broker writing it would corrupt it."""
        os.makedirs(self.root, exist_ok=True)
        fd = os.open(os.path.join(self.root, layout.LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StorageError(f"{self.root} is in use by another store (another broker?)") from None
        self._lock_fd = fd

    def _load_namespace(self) -> None:
        # Loading creates a few objects per topic, all long-lived: collecting
        # garbage meanwhile would only rescan them (it doubled the open time).
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._load_streams()
        finally:
            if was_enabled:
                gc.enable()

    def _load_streams(self) -> None:
        for path, directory in self._find_streams():
            try:
                with open(os.path.join(directory, layout.STREAM_FILE), "rb") as f:
                    meta = json.loads(f.read())
            except (OSError, ValueError) as exc:
                log.error("stream %s: unreadable %s (%s); skipped", path, layout.STREAM_FILE, exc)
                continue
            stream = StreamState(path, _policy_from_json(meta["policy"]), meta["created_ms"])
            self._add_loaded_stream(stream)
            self._load_topics(stream, directory)
            self._load_cursors(stream, directory)

    def _json_log(self, directory: str, name: str) -> JsonLog:
        key = _cursor_key if name == layout.CURSORS_FILE else None
        return JsonLog(os.path.join(directory, name), on_full=self.volumes[0].release_ballast, key=key)

    def _find_streams(self) -> list[tuple[str, str]]:
        """Stream directories under the first volume; streams do not nest, so stop at each."""
        found = []
        stack = [("", layout.streams_root(self.root))]
        while stack:
            rel, directory = stack.pop()
            try:
                entries = list(os.scandir(directory))
            except FileNotFoundError:
                continue
            if any(e.name == layout.STREAM_FILE for e in entries):
                found.append((rel, directory))
                continue
            stack.extend((f"{rel}/{e.name}", e.path) for e in entries if e.is_dir(follow_symlinks=False))
        return found

    def _load_topics(self, stream: StreamState, directory: str) -> None:
        catalog = self._topic_logs[stream.path] = self._json_log(directory, layout.TOPICS_FILE)
        live: dict[str, dict] = {}
        for rec in catalog.load():
            if rec.get("del"):
                live.pop(rec["t"], None)
            else:
                live[rec["t"]] = rec
        topics, by_id = stream.topics, self._topics_by_id
        for rec in live.values():
            topic = TopicState(stream, raw=(rec["t"], rec["id"], rec["p"], rec["c"], rec["at"]))
            topics[topic.name] = topic
            by_id[topic.id_hex] = topic
        if catalog.lines > 2 * len(live) + 64:
            catalog.rewrite(list(live.values()))

    def _load_cursors(self, stream: StreamState, directory: str) -> None:
        catalog = self._cursor_logs[stream.path] = self._json_log(directory, layout.CURSORS_FILE)
        catalog.load()
        for rec in catalog.live.values():
            cursor = Cursor(rec["t"], rec["p"], rec["o"], rec["e"], rec["m"], rec["ts"])
            stream.cursors.setdefault(rec["g"], {})[(cursor.topic, cursor.partition)] = cursor
        if catalog.lines > 2 * len(catalog.live) + 64:
            catalog.rewrite(list(catalog.live.values()))

    async def close(self) -> None:
        for task in (self._retention_task, self._cleaner_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await asyncio.gather(*(p.checkpoint() for p in self._opened_partitions()))
        for catalog in [*self._topic_logs.values(), *self._cursor_logs.values()]:
            await catalog.commit.wait()
            catalog.close()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        self.handles.close_all()
        await asyncio.to_thread(write_atomic, os.path.join(self.root, layout.CLEAN_MARKER), b"")
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _empty_trash(self) -> None:
        """Reclaim deleted trees, then take back the ballast if it was used."""
        for volume in self.volumes:
            empty_trash(layout.trash_dir(volume.path))
            volume.restore_ballast()

    # retention -----------------------------------------------------------------

    async def _retention_loop(self) -> None:
        while True:
            await asyncio.sleep(self.retention_check_ms / 1000)
            try:
                await self.enforce_retention()
            except Exception:
                log.exception("retention pass failed")

    async def enforce_retention(self, now: int | None = None) -> int:
        """Delete partitionlets past their ttl or size cap; returns how many went.

        Runs every `retention_check_ms` in the background; tests call it
        directly. Only partitions that hold data on disk are opened.
        """
        now = now_ms() if now is None else now
        deleted = 0
        async for part in self._partitions_on_disk(lambda settings: settings.retains):
            deleted += await part.enforce_retention(now)
        return deleted

    async def _partitions_on_disk(self, wanted: Callable[[Settings], bool]) -> AsyncIterator[DiskPartition]:
        """Partitions that hold data, of topics whose settings are `wanted`, yielding to the loop often."""
        visited = 0
        for stream in list(self._streams.values()):
            for n, topic in enumerate(list(stream.topics.values())):
                if n % 4096 == 4095:
                    await asyncio.sleep(0)  # a million topics must not stall the loop
                if not wanted(topic.settings):
                    continue
                for index in range(topic.info.partitions):
                    opened = topic.partitions and topic.partitions.get(index)
                    if not opened and not os.path.exists(self._manifest_of(topic, index)):
                        continue
                    part = self.partition(stream.path, topic.name, index)
                    if not part._closed:
                        yield part
                    visited += 1
                    if visited % 256 == 0:
                        await asyncio.sleep(0)

    # log compaction --------------------------------------------------------------

    async def _cleaner_loop(self) -> None:
        while True:
            await asyncio.sleep(self.cleaner_backoff_ms / 1000)
            try:
                await self.clean_logs()
            except Exception:
                log.exception("log cleaner pass failed")

    async def clean_logs(self, now: int | None = None) -> list[CleanResult]:
        """Clean every compacted partition whose cleaning is due (see cleaner.py).

        Runs every `cleaner_backoff_ms` in the background; tests and the
        benchmark call it directly. A partition whose files change under
        the cleaner (retention, a deleted topic) is left for the next pass.
        """
        if self.record_codec is None:
            return []
        results = []
        async for part in self._partitions_on_disk(lambda settings: settings.compact):
            try:
                result = await clean_partition(part, self.record_codec, self.cleaner_dedupe_buffer_bytes, now)
            except FileNotFoundError as exc:
                log.info("%s: its files changed during cleaning (%s); trying again next pass", part.name, exc)
                continue
            if result is not None:
                results.append(result)
        return results

    def _manifest_of(self, topic: TopicState, index: int) -> str:
        directory = layout.partition_dir(self.root, topic.stream.path, topic.name, index)
        return os.path.join(directory, layout.MANIFEST_FILE)

    # namespace hooks -------------------------------------------------------------

    async def _persist_stream(self, stream: StreamState, created: bool) -> None:
        directory = layout.stream_dir(self.root, stream.path)
        meta = json.dumps({"policy": _policy_to_json(stream.policy), "created_ms": stream.created_ms}).encode()

        def work() -> None:
            if created and os.path.exists(os.path.join(directory, layout.STREAM_FILE)):
                raise StorageError(f"stream directory {directory} already holds a stream")
            make_dirs(directory)
            if created:  # empty logs now, so no first append has to fsync the directory
                for name in (layout.TOPICS_FILE, layout.CURSORS_FILE):
                    os.close(os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CREAT, 0o644))
            write_atomic(os.path.join(directory, layout.STREAM_FILE), meta)  # fsyncs the directory too

        await asyncio.to_thread(work)
        if created:
            self._topic_logs[stream.path] = self._json_log(directory, layout.TOPICS_FILE)
            self._cursor_logs[stream.path] = self._json_log(directory, layout.CURSORS_FILE)

    async def _persist_stream_deleted(self, stream: StreamState) -> None:
        for part in self._opened_partitions([stream]):
            part.close()
        for catalog in (self._topic_logs.pop(stream.path), self._cursor_logs.pop(stream.path)):
            catalog.close()

        def work() -> None:
            for volume in self.volumes:
                move_to_trash(layout.stream_dir(volume.path, stream.path), layout.trash_dir(volume.path))

        await asyncio.to_thread(work)
        self._spawn(asyncio.to_thread(self._empty_trash))

    async def _persist_topics(self, stream: StreamState, topics: Sequence[TopicState]) -> None:
        catalog = self._topic_logs[stream.path]
        await catalog.append([
            {"t": t.name, "id": t.id_hex, "p": t.info.partitions, "c": t.info.configs, "at": t.info.created_ms}
            for t in topics
        ])
        await catalog.commit.wait()

    async def _persist_topic_deleted(self, stream: StreamState, topic: TopicState) -> None:
        catalog = self._topic_logs[stream.path]
        await catalog.append([{"t": topic.name, "del": 1}])
        await catalog.commit.wait()
        for part in (topic.partitions or {}).values():
            part.close()

        def work() -> None:
            for volume in self.volumes:
                move_to_trash(layout.topic_dir(volume.path, stream.path, topic.name),
                              layout.trash_dir(volume.path))

        await asyncio.to_thread(work)
        self._spawn(asyncio.to_thread(self._empty_trash))

    async def _persist_cursors(
        self, stream: StreamState, group: str, cursors: Sequence[Cursor], deleted: Sequence[tuple[str, int]]
    ) -> None:
        catalog = self._cursor_logs[stream.path]
        records = [
            {"g": group, "t": c.topic, "p": c.partition, "o": c.offset, "e": c.leader_epoch, "m": c.metadata,
             "ts": c.commit_time_ms}
            for c in cursors
        ]
        records += [{"g": group, "t": t, "p": p, "del": 1} for t, p in deleted]
        await catalog.append(records)
        if stream.policy.fsync is not FsyncPolicy.NONE:
            await catalog.commit.wait()
        await catalog.compact_if_stale(_COMPACT_SLACK)

    async def _purge_topic(self, stream: StreamState, topic: TopicState) -> None:
        for index in range(topic.info.partitions):
            opened = topic.partitions and topic.partitions.get(index)
            if opened or os.path.exists(self._manifest_of(topic, index)):
                await self.partition(stream.path, topic.name, index).purge()

    def _new_partition(self, topic: TopicState, index: int) -> DiskPartition:
        return DiskPartition(self, topic, index)


def _cursor_key(rec: dict) -> tuple[str, str, int]:
    return rec["g"], rec["t"], rec["p"]


def _policy_to_json(policy: StreamPolicy) -> dict:
    out = dataclasses.asdict(policy)
    out["fsync"] = FsyncPolicy(policy.fsync).value
    return out


def _policy_from_json(data: dict) -> StreamPolicy:
    fields = {f.name for f in dataclasses.fields(StreamPolicy)}
    values = {k: v for k, v in data.items() if k in fields}
    values["permissions"] = PermissionEntries(**data.get("permissions", {}))
    values["fsync"] = FsyncPolicy(data.get("fsync", FsyncPolicy.INTERVAL.value))
    return StreamPolicy(**values)
