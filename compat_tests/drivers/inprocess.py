"""What the in-process Python drivers share: decoding and bounded waiting."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

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


LISTING_WAIT = 10.0  # seconds a created topic may take to reach a broker's metadata


def listed_within(names: Callable[[], Any], name: str, timeout: float = LISTING_WAIT) -> bool:
    """Whether `name` shows in names() within timeout.

    Kafka answers CreateTopics once the controller has the topic; the broker's
    metadata cache learns it a moment later, so a client that lists at once can
    miss it. A user would look again, and so do the drivers; a topic that never
    shows still answers False.
    """
    deadline = time.monotonic() + timeout
    while name not in names():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def settled(read: Callable[[], T], wanted: Callable[[T], bool], timeout: float = LISTING_WAIT) -> T:
    """read() again until wanted(its value) or timeout; the last value read.

    Every broker of a cluster learns of an admin change (new partitions, a
    topic config) a moment after the change is answered, as on Kafka ("it
    may take several seconds ... for all the brokers to become aware", Admin
    javadoc), and a describe may be answered by another broker. A change that
    never shows returns the old value, which the scenario then refuses.
    """
    deadline = time.monotonic() + timeout
    value = read()
    while not wanted(value) and time.monotonic() < deadline:
        time.sleep(0.1)
        value = read()
    return value


async def asettled(read: Callable[[], Awaitable[T]], wanted: Callable[[T], bool], timeout: float = LISTING_WAIT) -> T:
    """settled() for a client whose calls are coroutines."""
    deadline = time.monotonic() + timeout
    value = await read()
    while not wanted(value) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        value = await read()
    return value


def listed_after_deleting(names: Callable[[], Any], name: str, timeout: float = LISTING_WAIT) -> bool:
    """Whether a deleted `name` still shows in names() after timeout.

    The other way round of listed_within: "it may take several seconds after
    [deleteTopics] returns success for all the brokers to become aware that
    the topics are gone" (Kafka's Admin javadoc), and a list may be answered
    by another broker of a cluster. A topic that stays listed answers True.
    """
    deadline = time.monotonic() + timeout
    while name in names():
        if time.monotonic() > deadline:
            return True
        time.sleep(0.1)
    return False
