"""What the in-process Python drivers share: decoding and bounded waiting."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

TIMEOUT = 30.0  # seconds any one step may take


def text(data: bytes | None) -> str | None:
    return None if data is None else data.decode()


def header_pairs(raw: Any) -> tuple[tuple[str, str], ...]:
    return tuple((k, text(v) or "") for k, v in (raw or ()))


def until(done: Callable[[], bool], step: Callable[[], None], what: str, timeout: float = TIMEOUT) -> None:
    """Call step() until done() or raise TimeoutError naming what never happened."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        step()
