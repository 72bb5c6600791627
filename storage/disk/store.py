"""The on-disk store: the namespace as directories, metadata as small files.

Per stream (on the first volume): `.stream` holds the policy (replaced
atomically), `.topics` is the topic catalog and `.cursors` the cursor log,
both append-only JSON lines replayed on open and compacted when mostly
stale; a stream with a million topics thus opens from one file. Partitions
open lazily on first use and create their directories on first append, and
open file descriptors are bounded by an LRU.

`store.json` counts opens: the count is the leader epoch stamped into every
batch, so epochs never go down across restarts. It also keeps the store's
id (made on first open) and its store-wide settings. `.clean` marks a clean
shutdown; without it, partitions validate their logs past the last
checkpoint as they are opened.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import functools
import gc
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import cast

from ..api import Cursor, FsyncPolicy, PermissionEntries, StreamPolicy
from ..compaction import DEFAULT_BACKOFF_MS, DEFAULT_DEDUPE_BUFFER_BYTES, RecordCodec, cleaner_loop
from ..errors import NotLeaderError, StorageError, StorageFullError, StorageUnavailableError, UnknownTopicError
from ..namespace import NamespaceStore, Settings, StreamState, TopicState, now_ms
from ..partition_base import RecordTimestamps
from . import layout
from .catalog import JsonLog
from .chain import highest_recorded_epoch, read_manifest
from .cleaner import CleanResult, clean_partition
from .files import empty_trash, fsync_dir, make_dirs, move_to_trash, write_atomic
from .format import check_format, read_epoch, read_identity, replay_topics, store_state, topic_deleted, topic_record
from .handles import FileHandles
from .metadata import (
    Finding,
    find_streams,
    holds_partition_data,
    is_hex_id,
    read_stream_file,
)
from .partition import DiskPartition
from .shared import WorkerShare
from .volumes import Volume

log = logging.getLogger(__name__)

_COMPACT_SLACK = 10_000  # stale lines tolerated before a running compaction
OFFLINE_RETRY_S = 30.0  # a partition that failed to load is tried again after this long
TOPICS_PER_LOOK = 1024  # topics whose partitions one look at the disk covers (off the loop)


class DiskStore(NamespaceStore):
    counts_partitions = True  # one process holds the store (its lock); topics load only at open

    def __init__(
        self,
        volumes: Sequence[str],
        default_stream: str = "/default",
        record_timestamps: RecordTimestamps | None = None,
        *,
        max_open_files: int = 1024,
        volume_limits: Mapping[str, int] | None = None,
        retention_check_ms: int = 60_000,
        skip_damaged: bool = False,
        verify_reads: bool = True,
        repair: bool = True,
        background_verify: bool = True,
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
        self._state_logs: dict[tuple[str, str], JsonLog] = {}  # (stream, table)
        self._settings_seen = (0, 0, 0)  # refresh_settings: store.json's version as last read
        self._background: set[asyncio.Task] = set()
        self._retention_task: asyncio.Task | None = None
        self._lock_fd: int | None = None
        self.skip_damaged = skip_damaged  # reads step over quarantined ranges instead of failing
        self.verify_reads = verify_reads  # reads check CRCs of bytes not verified since open
        self.repair = repair  # False: an offline check that reports and writes nothing
        self.background_verify = background_verify
        self.findings: list[Finding] = []
        self.log_findings = True  # `store check` prints them instead
        self._offline: dict[tuple[str, int], tuple[str, float]] = {}  # partitions that failed to load
        # Opening off the event loop (open_partitions): one thread opens one partition at a time under
        # _open_lock, which a synchronous open on the loop takes too; an open under way is shared by
        # every caller (_opening), and one finished in the thread waits in _landed until the loop
        # installs it (installs happen on the loop's thread only).
        self._open_lock = threading.Lock()
        self._opening: dict[tuple[str, int], asyncio.Future[DiskPartition]] = {}
        self._landed: dict[tuple[str, int], DiskPartition] = {}
        self._opener: ThreadPoolExecutor | None = None
        self.share: WorkerShare | None = None  # set before open by a worker of `serve --workers N` (shared.py)
        self._catalog_seen: dict[str, tuple[int, int, int]] = {}  # a non-controller worker: .topics as last read
        self._catalog_lock = asyncio.Lock()  # one refresh_catalog at a time

    @property
    def root(self) -> str:
        return self.volumes[0].path

    def data_dirs(self) -> list[str]:
        return [volume.path for volume in self.volumes]

    def volume_ids(self) -> list[str]:
        return list(self._by_id)

    def report(self, path: str, problem: str, action: str, *, error: bool = False) -> None:
        """Record damage found in one file: one log line with the path, what is wrong and what is done.

        `error` marks damage that costs data (quarantined offsets); metadata
        rebuilt without loss is a warning.
        """
        self.findings.append(Finding(path, problem, action))
        if self.repair and self.log_findings:
            log.log(logging.ERROR if error else logging.WARNING, "%s %s; action taken: %s", path, problem, action)

    def raise_epoch(self, seen: int, where: str) -> int:
        """A partition holds leader epoch `seen`, at or above the store's: lead from seen + 1 on, and remember it."""
        store_file = os.path.join(self.root, layout.STORE_FILE)
        self.report(store_file, f"has an epoch below {where}'s {seen}", f"raise it to {seen + 1}")
        self.epoch = seen + 1
        if self.repair and self._writes_catalog:
            self._write_store_file(self._settings)
        return self.epoch

    @property
    def _writes_catalog(self) -> bool:
        """Whether this process writes the shared logs and store.json (all but a non-controller worker)."""
        return self.share is None or self.share.controller

    @property
    def _shares_logs(self) -> bool:
        """Whether other processes write the cursor logs and state tables too: the workers of
        `serve --workers N`, each for the groups and transactional ids it coordinates."""
        return self.share is not None and self.share.count > 1

    def _owns(self, topic: TopicState, index: int) -> bool:
        return self.share is None or self.share.owns(topic.stream.path, topic.name, index)

    def volume(self, volume_id: str) -> Volume:
        try:
            return self._by_id[volume_id]
        except KeyError:
            raise StorageError(f"data lives on volume {volume_id!r}, which is not configured") from None

    # open / close --------------------------------------------------------------

    async def open(self) -> None:
        await asyncio.to_thread(self._open_files)
        await asyncio.to_thread(self._load_namespace)  # nothing else uses the store yet
        if not self.repair:
            return  # an offline check: no default stream, no background work
        if self._writes_catalog:
            await self._ensure_default_stream()
        else:
            self._catalog_seen = {path: _file_version(log.path) for path, log in self._topic_logs.items()}
        self._spawn(asyncio.to_thread(self._empty_trash))
        self._retention_task = asyncio.get_running_loop().create_task(self._retention_loop())
        if self.record_codec is not None:
            cleaner = cleaner_loop(self.clean_logs, self.cleaner_backoff_ms)
            self._cleaner_task = asyncio.get_running_loop().create_task(cleaner)
        if self.background_verify:
            self._spawn(self.verify_all())

    async def verify_all(self, progress: Callable[[str, int], None] | None = None) -> int:
        """Open every partition holding data and check the CRC of every batch; returns damaged ranges found.

        The broker runs this once in the background after opening (reads
        check what it has not reached yet); `store check` runs it in the
        foreground, calling progress(partition name, damaged ranges so far).
        """
        found = 0
        for stream, topic, index in await self._found_on_disk(lambda topic: True, self._holds_data):
            try:
                part = await self.open_partition(stream.path, topic.name, index)
                found += await part.verify()
            except UnknownTopicError:
                continue  # deleted meanwhile
            except StorageError:
                found += 1  # reported when it was found
            if progress is not None:
                progress(f"{stream.path}:{topic.name}/{index}", found)
            await asyncio.sleep(0)
        return found

    async def _found_on_disk(self, wanted: Callable[[TopicState], bool], holds: Callable[[TopicState, int], bool]
                             ) -> list[tuple[StreamState, TopicState, int]]:
        """The partitions of `wanted` topics this process owns that are open or that `holds` finds on disk.

        The disk is looked at in a thread, TOPICS_PER_LOOK topics at a time: a
        stat per partition held the event loop 0.1-0.3 s per thousand topics
        on a loaded machine, right after every start and at every retention
        pass (issue 32).
        """
        def look(stream: StreamState, topics: list[TopicState]) -> list[tuple[StreamState, TopicState, int]]:
            return [(stream, topic, index) for topic in topics for index in range(topic.info.partitions)
                    if self._owns(topic, index) and ((topic.partitions and topic.partitions.get(index))
                                                     or holds(topic, index))]

        found = []
        for stream in list(self._streams.values()):
            topics = [topic for topic in list(stream.topics.values()) if wanted(topic)]
            for first in range(0, len(topics), TOPICS_PER_LOOK):
                found += await asyncio.to_thread(look, stream, topics[first:first + TOPICS_PER_LOOK])
        return found

    def _holds_data(self, topic: TopicState, index: int) -> bool:
        return any(os.path.isdir(layout.partition_dir(v.path, topic.stream.path, topic.name, index))
                   for v in self.volumes)

    def _open_files(self) -> None:
        if self.share is not None:
            self._open_shared()
            return
        self._lock_data_dir()
        check_format(os.path.join(self.root, layout.STORE_FILE))  # before anything is written
        for volume in self.volumes:
            volume.open(self.report, self.repair)
            if volume.id in self._by_id:
                raise StorageError(f"{volume.path} and {self._by_id[volume.id].path} are the same volume "
                                   f"(both {layout.VOLUME_ID_FILE} say {volume.id}); refusing to start")
            self._by_id[volume.id] = volume
        store_file = os.path.join(self.root, layout.STORE_FILE)
        marker = os.path.join(self.root, layout.CLEAN_MARKER)
        epoch, problem = read_epoch(store_file)
        self.clean = problem is None and (epoch == 0 or os.path.exists(marker))  # epoch 0: a new store
        if problem is not None or (epoch == 0 and self.volumes[0].holds_data()):
            epoch = max(epoch, highest_recorded_epoch(self.root))
            self.report(store_file, problem or "is missing",
                        f"rebuild it from the highest leader epoch in the manifests ({epoch})")
            self.clean = False
        self.epoch = epoch + 1
        self._read_identity(store_file)
        if not self.repair:
            return
        self._write_store_file(self._settings)
        if os.path.exists(marker):
            os.unlink(marker)
            fsync_dir(self.root)
        if not self.clean:
            log.warning("%s was not shut down cleanly; partitions are validated as they open", self.root)

    def _open_shared(self) -> None:
        """_open_files for a worker: the supervisor holds the lock, gave the epoch and removed the
        clean marker (so tails are checked as partitions open); the controller alone writes store.json."""
        assert self.share is not None
        self._check_lock_held()
        check_format(os.path.join(self.root, layout.STORE_FILE))
        for volume in self.volumes:
            volume.open(self.report, self.repair and self.share.controller)
            self._by_id[volume.id] = volume
        self.clean = False
        self.epoch = self.share.epoch
        self._read_identity(os.path.join(self.root, layout.STORE_FILE))
        if self.share.controller:
            self._write_store_file(self._settings)

    def _check_lock_held(self) -> None:
        """A worker writes without the lock: refuse unless another process (its supervisor) holds it."""
        fd = os.open(os.path.join(self.root, layout.LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        finally:
            os.close(fd)  # also lets go of the lock if it was taken just now
        raise StorageError(f"{self.root}: a worker opens the store only under its supervisor "
                           "(kafkacompat serve --workers N), which holds the store's lock")

    def _write_store_file(self, settings: dict[str, str]) -> None:
        write_atomic(os.path.join(self.root, layout.STORE_FILE), store_state(self.epoch, str(self.store_id), settings),
                     on_full=self.volumes[0].release_ballast)

    def _read_identity(self, store_file: str) -> None:
        """The store id and settings kept beside the epoch (a store made before them, or a garbled file, gets new ones)."""
        store_id, settings = read_identity(store_file)
        if store_id is not None:
            self.store_id = store_id
        if settings is not None:
            self._take_settings(settings)

    async def _persist_settings(self, settings: dict[str, str]) -> None:
        self._check_writer()
        await asyncio.to_thread(self._write_store_file, settings)

    def _lock_data_dir(self) -> None:
        """One store per data dir: a second broker writing it would corrupt it."""
        if self.repair:
            os.makedirs(self.root, exist_ok=True)
        if not os.path.isdir(self.root):
            raise StorageError(f"{self.root} does not exist")
        lock_path = os.path.join(self.root, layout.LOCK_FILE)
        if not self.repair and not os.path.exists(lock_path):
            return  # nothing ever ran here, and a check creates no files
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
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
        for path, directory in find_streams(self.root):
            self._load_stream(path, directory)

    def _load_stream(self, path: str, directory: str) -> None:
        stream_file = os.path.join(directory, layout.STREAM_FILE)
        meta, problem = read_stream_file(stream_file, _policy_from_json)
        if problem is not None:
            # ttl 0: a repair must not start deleting what the lost policy may have kept forever
            meta = {"policy": _policy_to_json(StreamPolicy(ttl_seconds=0)), "created_ms": now_ms()}
            self.report(stream_file, problem, "rebuild it with the default stream policy but ttl 0, keeping "
                        f"every message (the damaged copy is kept as {layout.STREAM_FILE}.damaged)")
            if self.repair and self._writes_catalog:
                if os.path.exists(stream_file):
                    os.replace(stream_file, stream_file + ".damaged")
                write_atomic(stream_file, json.dumps(meta).encode(), on_full=self.volumes[0].release_ballast)
        stream = StreamState(path, _policy_from_json(meta["policy"]), meta["created_ms"])
        self._add_loaded_stream(stream)
        self._load_topics(stream, directory)
        self._load_cursors(stream, directory)
        self._load_state_tables(stream, directory)

    def _json_log(self, directory: str, name: str) -> JsonLog:
        if name == layout.CURSORS_FILE:
            key = _cursor_key
        elif name.startswith(layout.STATE_PREFIX):
            key = _state_key
        else:
            key = None
        return JsonLog(os.path.join(directory, name), on_full=self.volumes[0].release_ballast, key=key,
                       shared=key is not None and self._shares_logs)

    def _load_topics(self, stream: StreamState, directory: str) -> None:
        catalog = self._topic_logs[stream.path] = self._json_log(directory, layout.TOPICS_FILE)
        live, bad = replay_topics(catalog.load(self.report, self.repair and self._writes_catalog))
        if bad:
            self.report(catalog.path, f"has {bad} incomplete record(s)", "skip them")
        topics, by_id = stream.topics, self._topics_by_id
        for rec in live.values():
            topic = TopicState(stream, raw=(rec["t"], rec["id"], rec["p"], rec["c"], rec["at"]))
            topics[topic.name] = topic
            by_id[topic.id_hex] = topic
        found = self._rediscover_topics(stream, directory, catalog.path) if self._writes_catalog else []
        for rec in found:
            live[rec["t"]] = rec
        # only the catalog's writer compacts it: a worker's rewrite would leave the controller appending
        # to the replaced file, and every topic made after it lost
        if self.repair and self._writes_catalog and (found or catalog.lines > 2 * len(live) + 64):
            catalog.rewrite(list(live.values()))

    def _rediscover_topics(self, stream: StreamState, directory: str, catalog_path: str) -> list[dict]:
        """Topic directories holding data that the catalog does not list (it was lost or damaged).

        Each comes back with the topic id its manifests name (so its data is
        kept, not discarded as an older topic's), as many partitions as it
        has directories, and no explicit configs. Returns their catalog records.
        """
        records = []
        for entry in sorted(os.scandir(directory), key=lambda e: e.name):
            if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("."):
                continue
            name = entry.name[1:] if entry.name.startswith("%") else entry.name
            if name in stream.topics:
                continue
            indexes = [int(d) for d in os.listdir(entry.path) if d.isdigit()]
            if not indexes or not holds_partition_data(entry.path, indexes):
                continue
            topic_id = None
            for index in sorted(indexes):
                manifest, _ = read_manifest(os.path.join(entry.path, str(index), layout.MANIFEST_FILE))
                if manifest is not None:
                    topic_id = manifest["topic_id"]
                    break
            if topic_id is None or topic_id in self._topics_by_id or not is_hex_id(topic_id):
                topic_id = uuid.uuid4().hex
            rec = topic_record(name, topic_id, max(indexes) + 1, {}, int(entry.stat().st_mtime * 1000))
            topic = TopicState(stream, raw=(name, topic_id, rec["p"], {}, rec["at"]))
            stream.topics[name] = topic
            self._topics_by_id[topic_id] = topic
            records.append(rec)
            self.report(catalog_path, f"does not list topic {name!r}, whose data is in {entry.path}",
                        f"add it back with {rec['p']} partition(s) and default configs")
        return records

    def _load_cursors(self, stream: StreamState, directory: str) -> None:
        catalog = self._cursor_logs[stream.path] = self._json_log(directory, layout.CURSORS_FILE)
        if not os.path.exists(catalog.path):  # created with the stream: only damage removes it
            self.report(catalog.path, "is missing", "start the stream with no committed offsets")
            if self.repair and self._writes_catalog:
                write_atomic(catalog.path, b"", on_full=self.volumes[0].release_ballast)
        catalog.load(self.report, self.repair and self._writes_catalog)
        bad = _apply_cursors(stream, catalog.live.values())
        if bad:
            self.report(catalog.path, f"has {bad} incomplete cursor record(s)", "skip them")
        if self.repair and self._writes_catalog and not catalog.shared and catalog.lines > 2 * len(catalog.live) + 64:
            catalog.rewrite(list(catalog.live.values()))

    def _follow_cursors(self, stream: StreamState) -> bool:
        catalog = self._cursor_logs.get(stream.path)
        if catalog is None or not catalog.shared:
            return False
        records = catalog.follow()
        if records is None:  # compacted by another worker: read whole
            stream.cursors = {}
            _apply_cursors(stream, catalog.live.values())
        elif records:
            _apply_cursors(stream, records)
            self._compact_later(catalog)
        return True

    def _follow_table(self, stream: StreamState, table: str) -> bool:
        if not self._shares_logs:
            return False
        catalog = self._state_logs.get((stream.path, table))
        if catalog is None:  # another worker may have made it since this one opened the store
            directory = layout.stream_dir(self.root, stream.path)
            if not os.path.exists(os.path.join(directory, layout.STATE_PREFIX + table)):
                return True
            catalog = self._state_logs[stream.path, table] = self._json_log(directory, layout.STATE_PREFIX + table)
            catalog.load(repair=False)
            stream.replace_table(table, _state_rows(catalog))
            return True
        records = catalog.follow()
        if records is None:
            stream.replace_table(table, _state_rows(catalog))
        elif records:
            rows = stream.tables.setdefault(table, {})
            for rec in records:
                if rec.get("del"):
                    rows.pop(rec["k"], None)
                elif "k" in rec:
                    rows[rec["k"]] = rec.get("v")
            stream.table_changed(table)
            self._compact_later(catalog)
        return True

    def _compact_later(self, catalog: JsonLog) -> None:
        """A shared log just followed: compact it in the background once stale (it is rewritten only if
        no process appended since this one read it whole)."""
        if catalog.live is not None and catalog.lines > 2 * len(catalog.live) + _COMPACT_SLACK:
            self._spawn(catalog.compact_if_stale(_COMPACT_SLACK))

    def _load_state_tables(self, stream: StreamState, directory: str) -> None:
        for name in os.listdir(directory):
            if not name.startswith(layout.STATE_PREFIX):
                continue
            table = name[len(layout.STATE_PREFIX):]
            catalog = self._state_logs[stream.path, table] = self._json_log(directory, name)
            catalog.load(repair=self._writes_catalog)
            stream.tables[table] = _state_rows(catalog)

    async def close(self) -> None:
        """Checkpoint every partition and let go of the data dir.

        On a full disk (or any write that fails) the close still completes:
        what could not be saved is logged, and the clean-shutdown marker is
        left out, so the next start checks the tails as after a crash.
        """
        for task in (self._retention_task, self._cleaner_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        await self._stop_opening()
        opened = [p for p in self._opened_partitions() if isinstance(p, DiskPartition)]
        await asyncio.gather(*(p.stop_moving() for p in opened if p.moving))  # resumed on the next open
        parts = [p for p in opened if p.unsaved()]  # one walk; a task only where there is something to save
        outcomes = await asyncio.gather(*(p.checkpoint() for p in parts), return_exceptions=True)
        if not self.repair:  # an offline check: nothing to write, only let go
            self.handles.close_all()
            self._release_lock()
            return
        saved = True
        for part, outcome in zip(parts, outcomes):
            if isinstance(outcome, (OSError, StorageError)):
                saved = False
                log.error("%s: its manifest could not be saved on close (%s); the next start checks its tail",
                          part.name, outcome)
            elif isinstance(outcome, BaseException):
                raise outcome
        for catalog in [*self._topic_logs.values(), *self._cursor_logs.values(), *self._state_logs.values()]:
            try:
                await catalog.commit.wait()
            except OSError as exc:
                saved = False
                log.error("%s could not be synced on close (%s)", catalog.path, exc)
            catalog.close()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        self.handles.close_all()
        if saved and self.share is None:  # a worker's supervisor marks the store clean once all stopped cleanly
            await asyncio.to_thread(self._mark_clean)
        self._release_lock()

    async def _stop_opening(self) -> None:
        """Let opens under way in the opening thread end (they are checkpointed with the rest), then the thread."""
        while self._opening:
            await asyncio.gather(*self._opening.values(), return_exceptions=True)
            await asyncio.sleep(0)  # their done callbacks install them
        if self._opener is not None:
            self._opener.shutdown(wait=False)  # idle now: it exits at once
            self._opener = None

    def _mark_clean(self) -> None:
        """Write the clean-shutdown marker (blocking); without room, the next start is treated as after a crash."""
        try:
            write_atomic(os.path.join(self.root, layout.CLEAN_MARKER), b"", on_full=self.volumes[0].release_ballast)
        except StorageFullError as exc:
            log.error("%s; the next start checks every partition's tail as after a crash", exc)

    def _release_lock(self) -> None:
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
        self.activity.retention_passes += 1
        async for part in self._partitions_on_disk(lambda settings: settings.retains):
            deleted += await part.enforce_retention(now)
        return deleted

    async def _partitions_on_disk(self, wanted: Callable[[Settings], bool]) -> AsyncIterator[DiskPartition]:
        """Partitions that hold data, of topics whose settings are `wanted`, yielding to the loop often."""
        found = await self._found_on_disk(lambda topic: wanted(topic.settings),
                                          lambda topic, index: os.path.exists(self._manifest_of(topic, index)))
        for visited, (stream, topic, index) in enumerate(found, 1):
            try:
                part = await self.open_partition(stream.path, topic.name, index)
            except UnknownTopicError:
                continue  # deleted meanwhile
            if not part._closed:
                yield part
            if visited % 256 == 0:
                await asyncio.sleep(0)

    # log compaction --------------------------------------------------------------

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

    def _check_writer(self) -> None:
        if not self._writes_catalog:
            raise StorageError("only worker 0 (the controller) changes the catalog and settings "
                               "of a store shared by workers")

    async def refresh_catalog(self) -> int:
        """A non-controller worker: take in the controller's topic changes (created, deleted, resized,
        reconfigured) from each stream's catalog that grew since last read; returns how many topics changed.

        Called in the background and before answering Metadata, so a topic the controller created
        before a request came is known to it. One refresh at a time: two overlapping ones could
        apply an older read after a newer one and drop a topic for a moment."""
        if self._writes_catalog:
            return 0
        async with self._catalog_lock:
            changed = 0
            for stream in list(self._streams.values()):
                catalog = self._topic_logs.get(stream.path)
                if catalog is None:
                    continue
                version = _file_version(catalog.path)  # one stat: cheap enough for every Metadata request
                if version == self._catalog_seen.get(stream.path):
                    continue
                reader = JsonLog(catalog.path)
                live, _bad = replay_topics(await asyncio.to_thread(reader.load, None, False))
                self._catalog_seen[stream.path] = version
                changed += self._apply_catalog(stream, live)
            return changed

    async def refresh_settings(self) -> None:
        """A non-controller worker: take in what the controller changed in the store's settings (group
        and broker configs, feature levels, client quotas) since this worker last looked; read again
        only when store.json changed. Without this, a worker served them as they were at its start.
        (The state tables worker 0 writes, ACLs, SCRAM users and delegation tokens among them, are
        followed as each is read: _follow_table.)"""
        if self._writes_catalog:
            return
        async with self._catalog_lock:
            store_file = os.path.join(self.root, layout.STORE_FILE)
            version = _file_version(store_file)
            if version != self._settings_seen:
                await asyncio.to_thread(self._read_identity, store_file)
                self._settings_seen = version

    async def refresh_streams(self, paths: Sequence[str]) -> None:
        """A non-controller worker: take in the streams of `paths` that the controller created since
        this worker opened the store (each is looked for only when asked about)."""
        if self._writes_catalog:
            return
        async with self._catalog_lock:
            for path in paths:
                directory = layout.stream_dir(self.root, path)
                if path in self._streams or not os.path.exists(os.path.join(directory, layout.STREAM_FILE)):
                    continue
                version = _file_version(os.path.join(directory, layout.TOPICS_FILE))  # before reading it
                await asyncio.to_thread(self._load_stream, path, directory)
                self._catalog_seen[path] = version

    def _apply_catalog(self, stream: StreamState, live: dict[str, dict]) -> int:
        changed = 0
        for name in [n for n in stream.topics if n not in live]:
            topic = stream.topics.pop(name)
            self._topics_by_id.pop(topic.id_hex, None)
            self._count_partitions(-topic.info.partitions)
            for part in (topic.partitions or {}).values():
                part.close()
            changed += 1
        for name, rec in live.items():
            topic = stream.topics.get(name)
            if topic is not None and topic.id_hex == rec["id"]:
                info = topic.info
                if info.partitions == rec["p"] and info.configs == rec["c"]:
                    continue
                topic.info = dataclasses.replace(info, partitions=rec["p"], configs=rec["c"])
                topic.forget_settings()
                self._count_partitions(rec["p"] - info.partitions)
            else:
                if topic is not None:  # deleted and made again under the same name
                    self._topics_by_id.pop(topic.id_hex, None)
                    self._count_partitions(-topic.info.partitions)
                    for part in (topic.partitions or {}).values():
                        part.close()
                self._register_topic(stream, TopicState(stream, raw=(name, rec["id"], rec["p"], rec["c"], rec["at"])))
            changed += 1
        return changed

    async def _persist_stream(self, stream: StreamState, created: bool) -> None:
        self._check_writer()
        directory = layout.stream_dir(self.root, stream.path)
        meta = json.dumps({"policy": _policy_to_json(stream.policy), "created_ms": stream.created_ms}).encode()

        def work() -> None:
            if created and os.path.exists(os.path.join(directory, layout.STREAM_FILE)):
                raise StorageError(f"stream directory {directory} already holds a stream")
            make_dirs(directory)
            if created:  # empty logs now, so no first append has to fsync the directory
                for name in (layout.TOPICS_FILE, layout.CURSORS_FILE):
                    os.close(os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CREAT, 0o644))
            write_atomic(os.path.join(directory, layout.STREAM_FILE), meta,  # fsyncs the directory too
                         on_full=self.volumes[0].release_ballast)

        await asyncio.to_thread(work)
        if created:
            self._topic_logs[stream.path] = self._json_log(directory, layout.TOPICS_FILE)
            self._cursor_logs[stream.path] = self._json_log(directory, layout.CURSORS_FILE)

    async def _persist_stream_deleted(self, stream: StreamState) -> None:
        self._check_writer()
        for part in self._opened_partitions([stream]):
            part.close()
        for catalog in (self._topic_logs.pop(stream.path), self._cursor_logs.pop(stream.path)):
            catalog.close()
        for key in [k for k in self._state_logs if k[0] == stream.path]:
            self._state_logs.pop(key).close()

        def work() -> None:
            for volume in self.volumes:
                move_to_trash(layout.stream_dir(volume.path, stream.path), layout.trash_dir(volume.path))

        await asyncio.to_thread(work)
        self._spawn(asyncio.to_thread(self._empty_trash))

    async def _persist_topics(self, stream: StreamState, topics: Sequence[TopicState]) -> None:
        self._check_writer()
        catalog = self._topic_logs[stream.path]
        await catalog.append([topic_record(t.name, t.id_hex, t.info.partitions, t.info.configs, t.info.created_ms)
                              for t in topics])
        await catalog.commit.wait()

    async def _persist_topic_deleted(self, stream: StreamState, topic: TopicState) -> None:
        self._check_writer()
        # Files first: a topic directory outliving its catalog entry would be
        # rediscovered (and resurrected) on the next open.
        for part in (topic.partitions or {}).values():
            part.close()

        def work() -> None:
            for volume in self.volumes:
                move_to_trash(layout.topic_dir(volume.path, stream.path, topic.name),
                              layout.trash_dir(volume.path))

        await asyncio.to_thread(work)
        catalog = self._topic_logs[stream.path]
        await catalog.append([topic_deleted(topic.name)])
        await catalog.commit.wait()
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
        if not catalog.shared:  # a shared one compacts as it follows (_compact_later)
            await catalog.compact_if_stale(_COMPACT_SLACK)

    async def _persist_state(
        self, stream: StreamState, table: str, records: Mapping[str, dict | None], durable: bool
    ) -> None:
        catalog = self._state_logs.get((stream.path, table))
        if catalog is None:
            directory = layout.stream_dir(self.root, stream.path)
            path = os.path.join(directory, layout.STATE_PREFIX + table)

            def create() -> None:  # the new file's directory entry must survive a crash too
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
                fsync_dir(directory)

            await asyncio.to_thread(create)
            self._follow_table(stream, table)  # a shared log: opened and read whole (another worker may have written it)
            catalog = self._state_logs.get((stream.path, table))  # or a concurrent first write made it
            if catalog is None:
                catalog = self._state_logs[stream.path, table] = self._json_log(directory, layout.STATE_PREFIX + table)
        await catalog.append([{"k": k, "del": 1} if v is None else {"k": k, "v": v} for k, v in records.items()])
        if stream.policy.fsync is FsyncPolicy.NONE:
            pass
        elif durable:
            await catalog.commit.wait()
        else:
            catalog.commit.start_later(stream.policy.fsync_interval_ms / 1000)
        if not catalog.shared:
            await catalog.compact_if_stale(_COMPACT_SLACK)

    async def _purge_topic(self, stream: StreamState, topic: TopicState) -> None:
        for index in range(topic.info.partitions):
            opened = topic.partitions and topic.partitions.get(index)
            if opened or os.path.exists(self._manifest_of(topic, index)):
                await self.partition(stream.path, topic.name, index).purge()

    def routing_epoch(self, stream: str, name: str, index: int) -> int:
        """The open partition's leader epoch, else the store's: the epoch a partition gets when it opens.

        Opening validates the partition's tail after a crash, on the event
        loop: Metadata for all topics opened every partition and, after a
        kill -9 with 50,000 topics, held every client for seconds (issue 32).
        A partition whose data shows a later epoch (store.json went back)
        raises the store's when it opens; the answer then goes up, as
        clients expect of leader epochs.
        """
        topic = self._topic(stream, name)
        opened = topic.partitions and topic.partitions.get(index)
        if opened:
            return opened.leader_epoch
        if not 0 <= index < topic.info.partitions:
            raise UnknownTopicError(f"topic {name!r} in stream {stream!r} has no partition {index}")
        return self.epoch

    def partition(self, stream: str, name: str, index: int) -> DiskPartition:
        """The partition, opened here if need be; an open under way in a thread is waited for and
        is this one (never two opens of one partition's files at once)."""
        topic = self._topic(stream, name)
        opened = topic.partitions and topic.partitions.get(index)
        if opened:
            return cast(DiskPartition, opened)
        with self._open_lock:
            landed = self._landed.get((topic.id_hex, index))
            if landed is not None:
                self._install(topic, index, landed)
            part = super().partition(stream, name, index)
        assert isinstance(part, DiskPartition)
        return part

    async def open_partition(self, stream: str, name: str, index: int) -> DiskPartition:
        """The partition, opened in the store's opening thread when it is not open yet.

        After a crash an open validates the partition's tail (it reads and
        checks the batches past the last checkpoint): on the event loop that
        held every other connection meanwhile (issue 32). Callers of one
        partition share one open, and it is served only once the open is done.
        """
        await self.open_partitions([(stream, name, index)])
        return self.partition(stream, name, index)  # an open that failed raises its error here

    async def open_partitions(self, wanted: Iterable[tuple[str, str, int]]) -> None:
        """Open those of `wanted` not open yet, one after another in the opening thread; unknown ones
        are left out and a failed open's error is kept for partition() to raise."""
        loop = asyncio.get_running_loop()
        jobs, waits = [], []
        for stream, name, index in wanted:
            state = self._streams.get(stream)
            topic = state.topics.get(name) if state is not None else None
            if topic is None or not 0 <= index < topic.info.partitions or (topic.partitions and
                                                                             topic.partitions.get(index)):
                continue
            key = (topic.id_hex, index)
            opening = self._opening.get(key)
            if opening is None:
                opening = self._opening[key] = loop.create_future()
                opening.add_done_callback(functools.partial(self._opened, topic, index))
                jobs.append((topic, index, opening))
            waits.append(opening)
        if jobs:
            if self._opener is None:
                self._opener = ThreadPoolExecutor(1, thread_name_prefix="partition-open")
            self._opener.submit(self._open_in_thread, loop, jobs)
        if waits:
            await asyncio.gather(*(asyncio.shield(opening) for opening in waits), return_exceptions=True)

    def _open_in_thread(self, loop: asyncio.AbstractEventLoop,
                        jobs: list[tuple[TopicState, int, asyncio.Future[DiskPartition]]]) -> None:
        """Open each partition through descriptors of its own (the store's are the loop's alone)."""
        for topic, index, opening in jobs:
            try:
                part = self._open_one(topic, index)
            except BaseException as exc:  # handed to the callers, on the loop
                loop.call_soon_threadsafe(_settle, opening, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, opening, part, None)

    def _open_one(self, topic: TopicState, index: int) -> DiskPartition:
        with self._open_lock:
            opened = topic.partitions and topic.partitions.get(index)
            if opened:
                assert isinstance(opened, DiskPartition)
                return opened
            handles = FileHandles(self.handles.max_open)
            try:
                part = self._new_partition(topic, index, handles)
            finally:
                handles.close_all()
            part.use_handles(self.handles)
            self._landed[(topic.id_hex, index)] = part
            return part

    def _opened(self, topic: TopicState, index: int, done: asyncio.Future[DiskPartition]) -> None:
        """On the loop, once an open in the thread ended: the partition is served from now on."""
        self._opening.pop((topic.id_hex, index), None)
        if not done.cancelled() and done.exception() is None:
            # not under _open_lock: the thread holds it while it opens the next partition
            self._install(topic, index, done.result())
            done.result().resume_move()

    def _install(self, topic: TopicState, index: int, part: DiskPartition) -> None:
        """Make an open done in the thread the topic's partition (on the loop's thread, as every install)."""
        self._landed.pop((topic.id_hex, index), None)
        if topic.partitions is None:
            topic.partitions = {}
        topic.partitions.setdefault(index, part)

    def _new_partition(self, topic: TopicState, index: int, handles: FileHandles | None = None) -> DiskPartition:
        """Load a partition; one that cannot be loaded answers StorageUnavailableError (logged once).

        Loading is retried after OFFLINE_RETRY_S (a disk may come back).
        """
        if not self._owns(topic, index):  # never two processes writing one partition's files
            raise NotLeaderError(f"partition {topic.stream.path}:{topic.name}/{index} belongs to another worker", -1)
        key = (topic.id_hex, index)
        failed = self._offline.get(key)
        if failed is not None and time.monotonic() < failed[1]:
            raise StorageUnavailableError(failed[0])
        try:
            part = DiskPartition(self, topic, index, handles)
        except (OSError, StorageError, ValueError, KeyError, TypeError) as exc:
            reason = f"partition {topic.stream.path}:{topic.name}/{index} cannot be served: {exc}"
            if failed is None:
                log.error("%s; answering KAFKA_STORAGE_ERROR", reason)
            self._offline[key] = (reason, time.monotonic() + OFFLINE_RETRY_S)
            raise StorageUnavailableError(reason) from exc
        if failed is not None:
            del self._offline[key]
            log.warning("partition %s:%s/%d is served again", topic.stream.path, topic.name, index)
        return part


def _settle(opening: asyncio.Future[DiskPartition], part: DiskPartition | None, exc: BaseException | None) -> None:
    if opening.done():
        return
    if exc is not None:
        opening.set_exception(exc)
    else:
        assert part is not None
        opening.set_result(part)


def _file_version(path: str) -> tuple[int, int, int]:
    """(inode, size, mtime ns) of a file, zeros when it is missing: changes with every append and rewrite."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return 0, 0, 0
    return st.st_ino, st.st_size, st.st_mtime_ns


def _cursor_key(rec: dict) -> tuple[str, str, int]:
    return rec["g"], rec["t"], rec["p"]


def _apply_cursors(stream: StreamState, records: Iterable[dict]) -> int:
    """Cursor records (set or deleted) into the stream's cursors, in order; returns how many were incomplete."""
    bad = 0
    for rec in records:
        try:
            group = str(rec["g"])
            if rec.get("del"):
                table = stream.cursors.get(group)
                if table is not None:
                    table.pop((str(rec["t"]), int(rec["p"])), None)
                    if not table:
                        del stream.cursors[group]
                continue
            cursor = Cursor(str(rec["t"]), int(rec["p"]), int(rec["o"]), int(rec["e"]), str(rec["m"]), int(rec["ts"]))
        except (KeyError, TypeError, ValueError):
            bad += 1
            continue
        stream.cursors.setdefault(group, {})[(cursor.topic, cursor.partition)] = cursor
    return bad


def _state_key(rec: dict) -> str:
    return rec["k"]


def _state_rows(log: JsonLog) -> dict[str, dict]:
    """A loaded state table's live records as get_state returns them: key -> value."""
    assert log.live is not None
    return {rec["k"]: rec["v"] for rec in log.live.values()}


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
