"""An append-only JSON-lines log, replayed on open and compacted when stale.

Topic catalogs and cursor logs use it: a million topics load from one file
in one parse instead of a million small files, and every change is one
appended line (fsynced by group commit). A log given a `key` keeps the live
record per key in memory and compacts itself while running (cursor logs
grow with every commit); others are compacted when opened.

A `shared` log is appended to by several processes (the workers of
`kafkacompat serve --workers N`, each writing the cursors and state of the
groups and transactions it coordinates): every append, compaction and
repair holds the file's flock and checks it still writes the file at the
path (a compaction elsewhere replaces it), and `follow` reads what the
others appended since the last look. The file's order is the order of the
changes: a follower applies every record from where it last read, its own
among them, so each process converges on the same last value per key.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
from collections.abc import Callable, Hashable, Iterable

from ..errors import StorageError, StorageFullError
from .files import FULL_ERRNOS, fsync_dir, fsync_path, write_atomic
from .sync import GroupCommit

log = logging.getLogger(__name__)
_ENCODER = json.JSONEncoder(separators=(",", ":"))


class JsonLog:
    def __init__(
        self, path: str, on_full: Callable[[], bool] | None = None, key: Callable[[dict], Hashable] | None = None,
        shared: bool = False,
    ) -> None:
        self.path = path
        self._on_full = on_full  # may free room on a full disk (see Volume.release_ballast)
        self._key = key
        self.live: dict[Hashable, dict] | None = {} if key else None  # a record with "del" removes its key
        self.lines = 0  # lines in the file, live or stale
        self._fd: int | None = None
        self._compacting: asyncio.Future[None] | None = None
        self.commit = GroupCommit(lambda: fsync_path(self.path))
        self.shared = shared
        self._seen = (0, 0)  # shared: (inode, bytes) of the file read into `live`

    def load(self, report: Callable[..., None] | None = None, repair: bool = True) -> list[dict]:
        """Every record in order; a torn last line (crash mid-write) is cut off.

        Lines that are not JSON objects (outside damage: garbage, zeroes, a
        flipped byte) are skipped and reported once for the file, via
        `report(path, problem, action)`; with `repair` the file is then
        rewritten without them.
        """
        try:
            with open(self.path, "rb") as f:
                if self.shared and repair:  # no other process is mid-append while a torn line is cut
                    fcntl.flock(f.fileno(), fcntl.LOCK_EX)
                data = f.read()
                self._seen = (os.fstat(f.fileno()).st_ino, len(data))
                return self._replay(data, report, repair)
        except FileNotFoundError:
            self.lines = 0
            return []

    def _replay(self, data: bytes, report: Callable[..., None] | None, repair: bool) -> list[dict]:
        if not data:
            return []
        keep = data.rfind(b"\n") + 1
        body = data[:keep]
        try:
            records = json.loads(b"[" + body.rstrip(b"\n").replace(b"\n", b",") + b"]") if keep else []
            bad = 0 if all(isinstance(r, dict) for r in records) else -1
        except ValueError:
            bad = -1
        if bad:
            records, bad = self._load_line_by_line(body)
        torn = len(data) - keep
        self._seen = (self._seen[0], keep)  # a shared log: an append still being written is read next time
        if torn and not (self.shared and not repair):  # a crash mid-append, or a file cut short
            if report is not None:
                report(self.path, f"ends with a torn line of {torn} bytes", "cut it off")
            else:
                log.warning("%s: dropping a torn last line of %d bytes", self.path, torn)
            if repair:
                os.truncate(self.path, keep)
        self.lines = len(records) + bad
        if bad and report is not None:
            report(self.path, f"has {bad} damaged line(s)", "skip them and rewrite the file without them")
        self._track(records)
        if bad and repair:
            self.rewrite(records)
        return records

    def follow(self) -> list[dict] | None:
        """A shared log: the records appended since the last look, in the file's order and already
        in `live`; None when the file was replaced (compacted by another process), after which
        `live` holds it whole, read afresh. One stat when nothing changed."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return []
        inode, size = self._seen
        if (st.st_ino, st.st_size) == self._seen:
            return []
        if st.st_ino != inode or st.st_size < size:
            return self._read_afresh()
        with open(self.path, "rb") as f:
            if os.fstat(f.fileno()).st_ino != inode:
                return self._read_afresh()
            f.seek(size)
            data = f.read()
        keep = data.rfind(b"\n") + 1  # a line another process is still writing is read next time
        records, _bad = self._load_line_by_line(data[:keep])
        self._seen = (inode, size + keep)
        self.lines += len(records)
        self._track(records)
        return records

    def _read_afresh(self) -> None:
        if self.live is not None:
            self.live = {}
        self.load(repair=False)
        return None

    def _track(self, records: Iterable[dict]) -> None:
        if self.live is None:
            return
        for rec in records:
            try:
                key = self._key(rec)
            except (KeyError, TypeError):
                continue  # a damaged record; the loader reports it
            if rec.get("del"):
                self.live.pop(key, None)
            else:
                self.live[key] = rec

    @staticmethod
    def _load_line_by_line(body: bytes) -> tuple[list[dict], int]:
        """(records, count of lines that are not JSON objects)."""
        records, bad = [], 0
        for line in body.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                rec = None
            if isinstance(rec, dict):
                records.append(rec)
            elif line.strip():
                bad += 1
        return records, bad

    async def append(self, records: list[dict]) -> None:
        """Write records (page cache); call `commit.wait()` for durability."""
        while self._compacting is not None:
            await asyncio.shield(self._compacting)
        data = "".join(_ENCODER.encode(r) + "\n" for r in records).encode()
        if not data:
            return
        try:
            self._write(data)
        except StorageFullError:
            if self._on_full is None or not self._on_full():
                raise
            self._write(data)
        if not self.shared:  # a shared log counts its own lines when it follows them
            self.lines += len(records)
        self._track(records)
        self.commit.wrote()

    async def compact_if_stale(self, slack: int) -> None:
        """Rewrite a keyed log holding more than twice its live records plus `slack` lines.

        Appends wait meanwhile; the rewrite (with its fsyncs) runs in a thread.
        """
        if self.live is None or self._compacting is not None or self.lines <= 2 * len(self.live) + slack:
            return
        self._compacting = asyncio.get_running_loop().create_future()
        try:
            records = list(self.live.values())
            self.close()
            rewrite = self._rewrite_unchanged if self.shared else self.rewrite
            await asyncio.to_thread(rewrite, records)
            self.commit.synced = self.commit.written  # the new file was fsynced whole
        finally:
            self._compacting.set_result(None)
            self._compacting = None

    def _rewrite_unchanged(self, records: list[dict]) -> None:
        """Blocking, a shared log: rewrite it with `records` (live as of the last follow) unless another
        process appended since; then the next compaction, after a follow, tries again."""
        fd, self._fd = self._lock_current(), None  # held here: rewrite() closes only self._fd
        try:
            st = os.fstat(fd)
            if (st.st_ino, st.st_size) != self._seen:
                return
            self.rewrite(records)
            st = os.stat(self.path)
            self._seen = (st.st_ino, st.st_size)
        finally:
            os.close(fd)  # and with it the lock, on the file just replaced

    def _write(self, data: bytes) -> None:
        """Append whole lines or nothing."""
        fd = self._lock_current() if self.shared else self._open()
        try:
            start = os.lseek(fd, 0, os.SEEK_END)
            if self.shared and start and os.pread(fd, 1, start - 1) != b"\n":
                # a line another process left torn (it died mid-append, or the disk filled): end it,
                # so it is skipped as one damaged line and these records are not glued onto it (a
                # single writer cuts its own torn line off as it opens the log)
                data = b"\n" + data
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            except OSError as exc:
                os.ftruncate(fd, start)
                if exc.errno in FULL_ERRNOS:
                    raise StorageFullError(f"no room to write {self.path}: {exc.strerror}") from exc
                raise
        finally:
            if self.shared:
                fcntl.flock(fd, fcntl.LOCK_UN)

    def _lock_current(self) -> int:
        """Blocking, a shared log: this process's descriptor of the file now at the path, flocked (a
        process that compacted the log in between replaced the file this one had open)."""
        while True:
            fd = self._open()
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                current = False
            if current:
                return fd
            fcntl.flock(fd, fcntl.LOCK_UN)
            self.close_file()

    def rewrite(self, records: list[dict]) -> None:
        """Blocking: replace the file with only the live records (atomic). Runs in a thread for a
        compaction: it closes only the descriptor (the group commit is the event loop's)."""
        self.close_file()
        data = "".join(_ENCODER.encode(r) + "\n" for r in records).encode()
        write_atomic(self.path, data, on_full=self._on_full)
        self.lines = len(records)

    def _open(self) -> int:
        if self._fd is None:
            new = not os.path.exists(self.path)
            try:
                mode = os.O_RDWR if self.shared else os.O_WRONLY  # a shared log reads its last byte (_write)
                self._fd = os.open(self.path, mode | os.O_CREAT | os.O_APPEND, 0o644)
            except FileNotFoundError:  # a shared log whose stream another process deleted
                raise StorageError(f"{self.path}: its directory is gone (the stream was deleted)") from None
            if new:
                fsync_dir(os.path.dirname(self.path))
        return self._fd

    def close(self) -> None:
        self.commit.cancel()
        self.close_file()

    def close_file(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
