"""A bounded cache of open file descriptors.

A broker may hold a million partitions; only the files in use stay open.
Descriptors are closed least-recently-used first and reopened on demand.
Only the event-loop thread uses these descriptors (fsync threads open
their own), so closing one never races with a read or write.
"""

from __future__ import annotations

import os
from collections import OrderedDict


class FileHandles:
    def __init__(self, max_open: int = 1024) -> None:
        self.max_open = max(max_open, 2)
        self._fds: OrderedDict[str, int] = OrderedDict()

    def get(self, path: str) -> int:
        fd = self._fds.get(path)
        if fd is not None:
            self._fds.move_to_end(path)
            return fd
        fd = os.open(path, os.O_RDWR)
        self._fds[path] = fd
        while len(self._fds) > self.max_open:
            _, old = self._fds.popitem(last=False)
            os.close(old)
        return fd

    def forget(self, path: str) -> None:
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def __len__(self) -> int:
        return len(self._fds)

    def close_all(self) -> None:
        while self._fds:
            os.close(self._fds.popitem()[1])
