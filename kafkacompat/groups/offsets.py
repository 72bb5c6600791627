"""A group's committed offsets, kept as cursors in each topic's own stream.

A group may commit for topics of several streams; each stream's cursor
store holds the group's cursors for its topics, so they live (and are
deleted) with the stream's data. This module gathers them per group.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from kafkacompat.storage import Cursor, StateFence, Store, UnknownStreamError


class CommittedOffsets:
    def __init__(self, store: Store) -> None:
        self.store = store

    def groups(self) -> set[str]:
        """Every group id that has a cursor in some stream."""
        found: set[str] = set()
        for stream in self.store.list_streams():
            found.update(self.store.list_cursor_groups(stream.path))
        return found

    def streams_of(self, group: str) -> list[str]:
        return [s.path for s in self.store.list_streams() if group in self.store.list_cursor_groups(s.path)]

    def has_offsets(self, group: str) -> bool:
        return bool(self.streams_of(group))

    def all(self, group: str) -> list[tuple[str, Cursor]]:
        """(stream, cursor) for every cursor of the group."""
        return [(stream, c) for stream in self.streams_of(group) for c in self.store.get_cursors(stream, group)]

    def lookup(self, group: str, stream: str, topic: str, partitions: Iterable[int] | None = None) -> dict[int, Cursor]:
        """The group's cursors of one topic, by partition: of `partitions` only, each found by its
        key (an OffsetFetch names its partitions: scanning every cursor of the group for each topic
        asked made fetching a group's cursors cost cursors², issue 32), else all of them."""
        try:
            if partitions is None:
                return {c.partition: c for c in self.store.get_cursors(stream, group) if c.topic == topic}
            found = ((index, self.store.get_cursor(stream, group, topic, index)) for index in partitions)
            return {index: cursor for index, cursor in found if cursor is not None}
        except UnknownStreamError:
            return {}

    async def commit(
        self, group: str, cursors: Iterable[tuple[str, Cursor]], fence: StateFence | None = None
    ) -> None:
        """Store the cursors, each stream's under `fence` (see Store.commit_cursors)."""
        by_stream: dict[str, list[Cursor]] = defaultdict(list)
        for stream, cursor in cursors:
            by_stream[stream].append(cursor)
        for stream, batch in by_stream.items():
            await self.store.commit_cursors(stream, group, batch, fence=fence)

    async def delete(
        self, group: str, partitions: Sequence[tuple[str, str, int]] | None = None, fence: StateFence | None = None
    ) -> None:
        """Delete all of the group's cursors, or those of (stream, topic, partition), each stream's
        under `fence` (see Store.delete_cursors)."""
        if partitions is None:
            for stream in self.streams_of(group):
                await self.store.delete_cursors(stream, group, fence=fence)
            return
        by_stream: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for stream, topic, partition in partitions:
            by_stream[stream].append((topic, partition))
        for stream, keys in by_stream.items():
            if group in self.store.list_cursor_groups(stream):
                await self.store.delete_cursors(stream, group, keys, fence=fence)
