"""Progress of long commands on stderr, so stdout stays the command's answer.

Shown when stderr is a terminal or when --progress asks for it (for logs of
scripted runs). On a terminal one line is redrawn in place; elsewhere a
line is written at most once a second, and once at the end.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

_INTERVAL = 1.0  # seconds between lines when not redrawing in place
_TICK = 0.2  # seconds between redraws of a waiting line


def wanted(flag: bool, stream: TextIO | None = None) -> bool:
    """--progress, or a person watching stderr."""
    stream = stream or sys.stderr
    return flag or stream.isatty()


class Progress:
    """`label: done/total (pct%)` for work counted in steps (partitions, topics)."""

    def __init__(self, label: str, total: int, enabled: bool, stream: TextIO | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self._inplace = self.stream.isatty()
        self._last = 0.0
        self._started = time.monotonic()

    def advance(self, steps: int = 1) -> None:
        self.done += steps
        now = time.monotonic()
        if self.enabled and (self._inplace or now - self._last >= _INTERVAL):
            self._last = now
            self._write(self._text())

    def finish(self) -> None:
        if self.enabled:
            self._write(self._text() + f" in {time.monotonic() - self._started:.1f} s", end=True)

    def _text(self) -> str:
        pct = 100 * self.done // self.total if self.total else 100
        return f"{self.label}: {self.done}/{self.total} ({pct}%)"

    def _write(self, text: str, end: bool = False) -> None:
        if self._inplace:
            self.stream.write("\r\033[K" + text + ("\n" if end else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


@contextmanager
def waiting(label: str, enabled: bool, stream: TextIO | None = None) -> Iterator[None]:
    """Elapsed time while one long request runs (a purge or a delete is one request to the broker)."""
    out = stream or sys.stderr
    if not enabled:
        yield
        return
    inplace = out.isatty()
    started = time.monotonic()
    stop = threading.Event()

    def tick() -> None:
        last = started
        while not stop.wait(_TICK):
            now = time.monotonic()
            if inplace:
                out.write(f"\r\033[K{label}: {now - started:.1f} s")
                out.flush()
            elif now - last >= _INTERVAL:
                last = now
                out.write(f"{label}: {now - started:.1f} s\n")
                out.flush()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    ok = False
    try:
        yield
        ok = True
    finally:
        stop.set()
        ticker.join()
        outcome = "done" if ok else "failed"
        out.write(("\r\033[K" if inplace else "") + f"{label}: {outcome} in {time.monotonic() - started:.1f} s\n")
        out.flush()
