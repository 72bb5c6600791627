"""An append-only JSON-lines log, replayed on open and compacted when stale.

Topic catalogs and cursor logs use it: a million topics load from one file
in one parse instead of a million small files, and every change is one
appended line (fsynced by group commit).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable

from ..errors import StorageFullError
from .files import FULL_ERRNOS, fsync_dir, fsync_path, write_atomic
from .sync import GroupCommit

log = logging.getLogger(__name__)


class JsonLog:
    def __init__(self, path: str, on_full: Callable[[], bool] | None = None) -> None:
        self.path = path
        self._on_full = on_full  # may free room on a full disk (see Volume.release_ballast)
        self.lines = 0  # lines in the file, live or stale
        self._fd: int | None = None
        self.commit = GroupCommit(lambda: fsync_path(self.path))

    def load(self) -> list[dict]:
        """Every record in order; a torn last line (crash mid-write) is cut off."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            self.lines = 0
            return []
        if not data:
            return []
        keep = data.rfind(b"\n") + 1
        text = data[:keep].decode()
        try:
            records = json.loads("[" + text.rstrip("\n").replace("\n", ",") + "]") if keep else []
        except ValueError:
            records = self._load_line_by_line(text)
        if keep < len(data):
            log.warning("%s: dropping a torn last line of %d bytes", self.path, len(data) - keep)
            os.truncate(self.path, keep)
        self.lines = len(records)
        return records

    def _load_line_by_line(self, text: str) -> list[dict]:
        records = []
        for n, line in enumerate(text.splitlines(), 1):
            try:
                records.append(json.loads(line))
            except ValueError:
                log.error("%s: line %d is not valid JSON; skipped", self.path, n)
        return records

    def append(self, records: Iterable[dict]) -> None:
        """Write records (page cache); call `commit.wait()` for durability."""
        data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
        if not data:
            return
        try:
            self._write(data)
        except StorageFullError:
            if self._on_full is None or not self._on_full():
                raise
            self._write(data)
        self.lines += data.count(b"\n")
        self.commit.wrote()

    def _write(self, data: bytes) -> None:
        """Append whole lines or nothing."""
        fd = self._open()
        start = os.lseek(fd, 0, os.SEEK_END)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except OSError as exc:
            os.ftruncate(fd, start)
            if exc.errno in FULL_ERRNOS:
                raise StorageFullError(f"no room to write {self.path}: {exc.strerror}") from exc
            raise

    def rewrite(self, records: list[dict]) -> None:
        """Replace the file with only the live records (atomic)."""
        self.close()
        data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()
        write_atomic(self.path, data)
        self.lines = len(records)

    def _open(self) -> int:
        if self._fd is None:
            new = not os.path.exists(self.path)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            if new:
                fsync_dir(os.path.dirname(self.path))
        return self._fd

    def close(self) -> None:
        self.commit.cancel()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
