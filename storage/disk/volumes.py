"""Data directories (volumes) and the space left on each.

A new partitionlet goes to the volume with the most free space, so one
partition spans volumes. A volume may carry a byte cap on the partitionlet
data the store keeps there: it stands in for a small disk in tests and lets
an operator reserve room on a shared disk.
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from collections.abc import Callable

from ..errors import StorageFullError
from . import layout
from .files import write_atomic

log = logging.getLogger(__name__)
_ID = re.compile(rb"[0-9a-f]{32}")


class Volume:
    """A data dir, known by an id kept inside it so manifests survive moving it."""

    __slots__ = ("path", "limit", "used", "id", "ballast_out", "_next_restore")
    BALLAST_BYTES = 64 * 1024
    RESTORE_EVERY_S = 1.0  # while the ballast cannot be restored, appends fail at once in between

    def __init__(self, path: str, limit: int | None = None) -> None:
        self.path = os.path.abspath(path)
        self.limit = limit
        self.used = 0  # bytes of partitionlet data here; counted only when capped
        self.id = ""
        self.ballast_out = False  # released (or never placed) and not yet restored
        self._next_restore = 0.0

    def open(self, report: Callable[..., None], repair: bool = True) -> None:
        """Create the volume's skeleton and read (or assign) its id.

        A missing or garbled id gets a new one (reported): manifests naming
        the old id are then rebuilt from their files. Without `repair`
        (an offline check) nothing is written.
        """
        id_file = os.path.join(self.path, layout.VOLUME_ID_FILE)
        if repair:
            os.makedirs(layout.streams_root(self.path), exist_ok=True)
            os.makedirs(layout.trash_dir(self.path), exist_ok=True)  # deleting must not need new room
        try:
            with open(id_file, "rb") as f:
                raw = f.read().strip()
            problem = None if _ID.fullmatch(raw) else "is garbled"
        except FileNotFoundError:
            raw, problem = b"", ("is missing" if self.holds_data() else None)
        if problem is None and raw:
            self.id = raw.decode()
        else:
            self.id = uuid.uuid4().hex
            if problem is not None:
                report(id_file, problem, "give the volume a new id; rebuild the manifests that name the old one")
            if repair:
                write_atomic(id_file, self.id.encode(), on_full=self.release_ballast)
        self.measure()
        if repair:
            self.restore_ballast()

    def holds_data(self) -> bool:
        try:
            return any(os.scandir(layout.streams_root(self.path)))
        except FileNotFoundError:
            return False

    # A full disk must still allow the metadata writes that free space
    # (DeleteRecords, retention, topic deletion): a small ballast file is
    # kept and given up when such a write finds the disk full.

    @property
    def _ballast_path(self) -> str:
        return os.path.join(self.path, layout.BALLAST_FILE)

    def release_ballast(self) -> bool:
        self.ballast_out = True
        try:
            os.unlink(self._ballast_path)
        except FileNotFoundError:
            return False
        log.warning("volume %s is full; released its ballast to write metadata", self.path)
        return True

    def restore_ballast(self) -> bool:
        """Re-create the ballast if there is room again (blocking); True if it is in place."""
        path = self._ballast_path
        if os.path.exists(path):
            self.ballast_out = False
            return True
        try:
            write_atomic(path, bytes(self.BALLAST_BYTES))
        except StorageFullError:
            self.ballast_out = True
            return False
        self.ballast_out = False
        return True

    def ensure_reserve(self) -> None:
        """Before appending data: the ballast must be in place, so data never eats the metadata reserve.

        Raises StorageFullError while it cannot be restored (tried at most
        once a second, so a full disk answers at once).
        """
        if not self.ballast_out:
            return
        now = time.monotonic()
        if now >= self._next_restore:
            if self.restore_ballast():
                return
            self._next_restore = now + self.RESTORE_EVERY_S
        raise StorageFullError(f"volume {self.path} is full (its metadata reserve is in use)")

    def measure(self) -> None:
        """Count the bytes already stored (only needed under a cap)."""
        if self.limit is None:
            return
        total = 0
        for root, _dirs, files in os.walk(layout.streams_root(self.path)):
            for name in files:
                if name.endswith(layout.LOG_SUFFIX):
                    try:
                        total += os.stat(os.path.join(root, name)).st_size
                    except FileNotFoundError:
                        pass
        self.used = total

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        free = st.f_bavail * st.f_frsize
        if self.limit is not None:
            free = min(free, self.limit - self.used)
        return free

    def reserve(self, nbytes: int) -> None:
        """Claim room for nbytes of data, or raise StorageFullError."""
        if self.limit is not None:
            if self.used + nbytes > self.limit:
                raise StorageFullError(
                    f"volume {self.path} is full ({self.used} of {self.limit} bytes used, {nbytes} more asked)"
                )
            self.used += nbytes

    def release(self, nbytes: int) -> None:
        if self.limit is not None:
            self.used = max(self.used - nbytes, 0)


def pick_volume(volumes: list[Volume], nbytes: int) -> Volume:
    """The volume with the most free space that can take nbytes."""
    best = max(volumes, key=lambda v: v.free_bytes())
    if best.free_bytes() < nbytes:
        raise StorageFullError(f"no volume has room for {nbytes} bytes")
    return best
