"""The campaign's record: one JSON object per line, written as things happen.

Every send, acknowledgement, read, commit, fault and broker finding goes
here, so the checker judges a run from this file alone (and a failed run can
be re-checked or read by hand). Each line carries `i`, its line number
(1-based, what violations cite), and `t`, seconds since the run began.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

Event = dict[str, Any]


class History:
    """Appends events from many threads; line order is the order they were recorded."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "w", encoding="utf-8")
        self._lock = threading.Lock()
        self._count = 0
        self._t0 = time.monotonic()
        self.last_at = self._t0  # monotonic time of the latest event: the closing phase's watchdog reads it

    def now(self) -> float:
        return round(time.monotonic() - self._t0, 4)

    def record(self, type_: str, **fields: Any) -> Event:
        with self._lock:
            self._count += 1
            event = {"i": self._count, "t": self.now(), "type": type_, **fields}
            self._file.write(json.dumps(event, separators=(",", ":")) + "\n")
            self.last_at = time.monotonic()
            return event

    def flush(self) -> None:
        with self._lock:
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def load(path: Path) -> list[Event]:
    """The events of a history file, in order."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
