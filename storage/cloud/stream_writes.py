"""This process's writes of a stream's cursors and state tables, and reads of them that must not undo one.

Why: the view of a stream's cursors and state tables is replaced by a read
from the database (after another broker's change, or a reload after an
outage). A write this process committed while such a read ran is in the view
already, and the read, begun before it, may not hold it: replacing the view
with that read took a group's committed offsets back (chaos, cloud, seed 12).
So a read that overlapped a write is read again. A stream written without a
pause (a consumer committing after every message) could race every read, so
after a few raced reads the next read holds this process's new writes of the
stream back until it is done: it waits for those under way, reads, then lets
the held ones go. Writes are counted once they hold a database connection and
before they start their transaction, so a held write keeps its connection and
the read, which has its own, never waits for a connection a writer holds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

# reads of a stream retried while writes race them, before one holds the writes back
RACED_READS = 3


class StreamWrites:
    """Per stream: writes under way and done, and reads holding new writes back."""

    def __init__(self) -> None:
        self._done: dict[str, int] = {}
        self._under_way: dict[str, int] = {}
        self._holding: dict[str, int] = {}  # reads holding the stream's writes back
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def writing(self, path: str) -> AsyncIterator[None]:
        """Around one write of `path`'s cursors or state tables (entered with its connection held)."""
        async with self._changed:
            await self._changed.wait_for(lambda: not self._holding.get(path))
            self._under_way[path] = self._under_way.get(path, 0) + 1
        try:
            yield
            self._done[path] = self._done.get(path, 0) + 1
        finally:
            async with self._changed:
                self._under_way[path] -= 1
                self._changed.notify_all()

    async def read(self, path: str, read: Callable[[], Awaitable[T]]) -> T:
        """`read()` of `path`'s cursors or state tables that no write of this process overlapped."""
        for _ in range(RACED_READS):
            before = self._done.get(path, 0)
            found = await read()
            if self._done.get(path, 0) == before:
                return found
        async with self._changed:
            self._holding[path] = self._holding.get(path, 0) + 1
            await self._changed.wait_for(lambda: not self._under_way.get(path))
        try:
            return await read()
        finally:
            async with self._changed:
                self._holding[path] -= 1
                self._changed.notify_all()
