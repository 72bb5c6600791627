"""Committed offsets as cursors in each topic's own stream.

A group's commit for a topic goes to the cursor table of the stream that
holds the topic, so cursors live (and are deleted) with the stream's data.
One group may thus have cursors in several streams; reads gather them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from storage import Cursor, Store


@dataclasses.dataclass(frozen=True, slots=True)
class StoredOffset:
    stream: str
    cursor: Cursor


class GroupOffsets:
    def __init__(self, store: Store) -> None:
        self.store = store

    def group_ids(self) -> set[str]:
        """Every group that has a cursor in some stream."""
        found: set[str] = set()
        for stream in self.store.list_streams():
            found.update(self.store.list_cursor_groups(stream.path))
        return found

    def of_group(self, group_id: str) -> list[StoredOffset]:
        out = []
        for stream in self.store.list_streams():
            for cursor in self.store.get_cursors(stream.path, group_id):
                out.append(StoredOffset(stream.path, cursor))
        return out

    def get(self, group_id: str, stream: str, topic: str) -> dict[int, Cursor]:
        """The group's cursors of one topic, by partition."""
        if self.store.get_stream(stream) is None:
            return {}
        return {
            c.partition: c for c in self.store.get_cursors(stream, group_id) if c.topic == topic
        }

    def has_any(self, group_id: str) -> bool:
        return any(
            self.store.get_cursors(stream.path, group_id) for stream in self.store.list_streams()
        )

    async def commit(self, group_id: str, by_stream: dict[str, list[Cursor]]) -> None:
        for stream, cursors in by_stream.items():
            if cursors:
                await self.store.commit_cursors(stream, group_id, cursors)

    async def delete(self, group_id: str, offsets: Iterable[StoredOffset]) -> None:
        by_stream: dict[str, list[tuple[str, int]]] = {}
        for stored in offsets:
            by_stream.setdefault(stored.stream, []).append((stored.cursor.topic, stored.cursor.partition))
        for stream, keys in by_stream.items():
            await self.store.delete_cursors(stream, group_id, keys)

    async def delete_partitions(self, group_id: str, stream: str, keys: Sequence[tuple[str, int]]) -> None:
        if keys:
            await self.store.delete_cursors(stream, group_id, keys)

    async def delete_group(self, group_id: str) -> None:
        for stream in self.store.list_streams():
            if group_id in self.store.list_cursor_groups(stream.path):
                await self.store.delete_cursors(stream.path, group_id)
