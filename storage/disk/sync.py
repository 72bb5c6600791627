"""Group commit: many writers, one fsync.

Writers take a ticket after writing; `wait(ticket)` returns once an fsync
that started after the ticket was taken has finished. The fsync runs in a
worker thread so the event loop (and every other partition) keeps going.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class GroupCommit:
    def __init__(self, flush: Callable[[], None], on_flushed: Callable[[float, bool], None] | None = None) -> None:
        self._flush = flush  # blocking; runs in a thread
        self._on_flushed = on_flushed  # (seconds, failed) after each flush, for the store's activity counts
        self.written = 0
        self.synced = 0
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def wrote(self, ticket: int | None = None) -> int:
        """Note a write; tickets must not go down (default: a counter)."""
        self.written = self.written + 1 if ticket is None else max(self.written, ticket)
        return self.written

    async def wait(self, ticket: int | None = None) -> None:
        ticket = self.written if ticket is None else min(ticket, self.written)
        while self.synced < ticket:
            await asyncio.shield(self.start())

    @property
    def busy(self) -> bool:
        """An fsync is running or scheduled."""
        return self._task is not None or self._timer is not None

    def start(self) -> asyncio.Task[None]:
        """Begin an fsync unless one is running; returns the running one."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
            self._task.add_done_callback(_log_failure)
        return self._task

    def start_later(self, delay_s: float) -> None:
        """Schedule an fsync (the interval policy's periodic group commit)."""
        if self._timer is None and self.synced < self.written:
            self._timer = asyncio.get_running_loop().call_later(delay_s, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self.synced < self.written:
            self.start()

    async def _run(self) -> None:
        target = self.written
        started, failed = time.monotonic(), True
        try:
            await asyncio.to_thread(self._flush)
            self.synced = max(self.synced, target)
            failed = False
        finally:
            self._task = None
            if self._on_flushed is not None:
                self._on_flushed(time.monotonic() - started, failed)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def drain(self) -> None:
        """Stop scheduling and let a running fsync finish (on close)."""
        self.cancel()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)



def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("fsync failed: %s", task.exception())
