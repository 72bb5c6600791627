"""Schema validation at the broker: records of a topic that opted in must carry a schema id of its subject.

Confluent Server's `confluent.value.schema.validation` (and `.key.`): each
record's value (key) must be framed as Confluent's serializers frame it
(magic byte 0, then a 4-byte schema id) with an id registered, not
soft-deleted, under the subject `<topic>-value` (`<topic>-key`): the
TopicNameStrategy. The payload itself is not decoded; what is checked is
that consumers will find the schema. A null value (a tombstone) passes. The
registry's id index is a dict lookup per record; it is read afresh from the
streams only when an id is not found, so a schema registered a moment ago
(or brought by a replica link) is seen.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kafkacompat.protocol.records import Record

from .registry import registry_of

if TYPE_CHECKING:
    from ..broker.cluster import Cluster

_ID = struct.Struct(">bI")


def _problem(data: bytes | None, subjects: set[str], index: dict[int, frozenset[str]], what: str) -> str | None:
    """Why one key or value fails (None: it passes); `subjects` are the names its topic's subject may take."""
    if data is None:
        return None
    if len(data) < 5 or data[0] != 0:
        return f"the {what} is not framed with a schema id (magic byte 0 and a 4-byte id)"
    schema_id = _ID.unpack_from(data)[1]
    holders = index.get(schema_id)
    if holders is None:
        return f"the {what}'s schema id {schema_id} is not registered"
    if holders.isdisjoint(subjects):
        return f"the {what}'s schema id {schema_id} is not registered under subject {min(subjects)}"
    return None


async def refusals(cluster: "Cluster", topic_names: Iterable[str], records: Iterable[Record], *,
                   keys: bool, values: bool) -> list[tuple[int, str]]:
    """(index in its batch, why) of each record refused; `topic_names` are the names the topic goes by."""
    registry = registry_of(cluster)
    names = set(topic_names)
    key_subjects, value_subjects = {f"{n}-key" for n in names}, {f"{n}-value" for n in names}
    listed = list(records)
    found = _all_problems(listed, registry.subjects_by_id(), key_subjects, value_subjects, keys, values)
    if found and await registry.log.catch_up():  # something new in the streams: look again
        found = _all_problems(listed, registry.subjects_by_id(), key_subjects, value_subjects, keys, values)
    return found


def _all_problems(records: list[Record], index: dict[int, frozenset[str]], key_subjects: set[str],
                  value_subjects: set[str], keys: bool, values: bool) -> list[tuple[int, str]]:
    """Each record's verdict, decided once per distinct 5-byte frame (a batch mostly carries one schema id)."""
    found = []
    verdicts: dict[tuple[str, bytes | None], str | None] = {}

    def judge(data: bytes | None, subjects: set[str], what: str) -> str | None:
        frame = None if data is None else data[:5]
        if (what, frame) not in verdicts:
            verdicts[what, frame] = _problem(data, subjects, index, what)
        return verdicts[what, frame]

    for position, record in enumerate(records):
        problem = (judge(record.key, key_subjects, "key") if keys else None) or (
            judge(record.value, value_subjects, "value") if values else None)
        if problem is not None:
            found.append((position, problem))
    return found
