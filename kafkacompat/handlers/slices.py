"""Answers about every topic, built and encoded in slices so that other connections are served meanwhile.

One event loop serves every connection. Metadata for all topics with
50,000 topics took 570-840 ms to build and encode, and the first one after
a restart 8.8 s (each partition opened to read its leader epoch): every
other client, producers and consumers included, waited that long (issue
32). Here the work is cut into slices of at most SLICE_S, with a turn of
the loop between them; a big answer is encoded topic by topic into a list
of buffers (the connection frames such a list without joining it), since
kio would encode the whole entity in one go.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from kafkacompat.protocol.messages import encode_body
from kafkacompat.protocol.varints import uvarint
from kafkacompat.protocol.versions import is_flexible

T = TypeVar("T")

SLICE_S = 0.005  # the longest the loop is held between turns while a big answer is made
ENCODED_FROM = 1000  # topics in an answer from which it is encoded here, in slices


class Slicer:
    """Gives the event loop a turn once SLICE_S has passed since the last one."""

    __slots__ = ("_since",)

    def __init__(self) -> None:
        self._since = time.monotonic()

    async def pause(self) -> None:
        if time.monotonic() - self._since >= SLICE_S:
            await asyncio.sleep(0)
            self._since = time.monotonic()


async def encode_with_array(
    api_key: int, version: int, body: Any, field: str, items: Sequence[T], encode_item: Callable[[T], bytes],
    slicer: Slicer, sample: Any,
) -> list[bytes]:
    """`body` with the encoded `items` as its array `field`: the bytes kio would write.

    `encode_item` writes one entry (kio's `encode_body` of an entity built
    for it, or a hand encoder's bytes); `sample` is any one entry as a kio
    entity. Each entry is built and encoded on its own and dropped at once:
    only bytes (which the garbage collector does not track) outlive it, so a
    big answer does not promote a million short-lived objects to the oldest
    generation, whose collections stop the loop for as long as the heap is
    big. kio encodes `body` with the array empty and with `sample` alone in
    it; where the two first differ is the array's length, so the entries go
    between what precedes it and what follows it.
    """
    empty = encode_body(dataclasses.replace(body, **{field: ()}))
    if not items:
        return [empty]
    flexible = is_flexible(api_key, version)
    first = encode_body(dataclasses.replace(body, **{field: (sample,)}))
    differs = next(i for i, (a, b) in enumerate(zip(empty, first)) if a != b)
    start = differs if flexible else differs - 3  # a compact length is one byte here, an INT32 four
    end = start + (1 if flexible else 4)
    chunks = [empty[:start] + (uvarint(len(items) + 1) if flexible else len(items).to_bytes(4, "big"))]
    for offset in range(0, len(items), 64):
        chunks.append(b"".join(encode_item(item) for item in items[offset:offset + 64]))
        await slicer.pause()
    chunks.append(empty[end:])
    return chunks
