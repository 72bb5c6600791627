"""Data directories (volumes) and the space left on each.

A new partitionlet goes to the volume with the most free space, so one
partition spans volumes. A volume may carry a byte cap on the partitionlet
data the store keeps there: it stands in for a small disk in tests and lets
an operator reserve room on a shared disk.
"""

from __future__ import annotations

import logging
import os
import uuid

from ..errors import StorageFullError
from . import layout
from .files import write_atomic

log = logging.getLogger(__name__)


class Volume:
    """A data dir, known by an id kept inside it so manifests survive moving it."""

    __slots__ = ("path", "limit", "used", "id")
    BALLAST_BYTES = 64 * 1024

    def __init__(self, path: str, limit: int | None = None) -> None:
        self.path = os.path.abspath(path)
        self.limit = limit
        self.used = 0  # bytes of partitionlet data here; counted only when capped
        self.id = ""

    def open(self) -> None:
        """Create the volume's skeleton and read (or assign) its id."""
        os.makedirs(layout.streams_root(self.path), exist_ok=True)
        os.makedirs(layout.trash_dir(self.path), exist_ok=True)  # deleting must not need new room
        id_file = os.path.join(self.path, layout.VOLUME_ID_FILE)
        try:
            with open(id_file) as f:
                self.id = f.read().strip()
        except FileNotFoundError:
            self.id = uuid.uuid4().hex
            write_atomic(id_file, self.id.encode())
        self.measure()
        self.restore_ballast()

    # A full disk must still allow the metadata writes that free space
    # (DeleteRecords, retention, topic deletion): a small ballast file is
    # kept and given up when such a write finds the disk full.

    @property
    def _ballast_path(self) -> str:
        return os.path.join(self.path, layout.BALLAST_FILE)

    def release_ballast(self) -> bool:
        try:
            os.unlink(self._ballast_path)
        except FileNotFoundError:
            return False
        log.warning("volume %s is full; released its ballast to write metadata", self.path)
        return True

    def restore_ballast(self) -> None:
        """Re-create the ballast if there is room again (blocking)."""
        path = self._ballast_path
        if os.path.exists(path):
            return
        try:
            write_atomic(path, bytes(self.BALLAST_BYTES))
        except StorageFullError:
            pass

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
