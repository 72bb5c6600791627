"""Schema validation at the broker: records of a topic that opted in must carry a schema id of its subject.

Confluent Server's `confluent.value.schema.validation` (and `.key.`): each
record's value (key) must be framed as Confluent's serializers frame it
(magic byte 0, then a 4-byte schema id) with an id registered, not
soft-deleted, under the subject the topic's subject name strategy names
(`confluent.value.subject.name.strategy`, `.key.`): `<topic>-value` by
TopicNameStrategy (the default), the schema's record name by
RecordNameStrategy, `<topic>-<record name>` by TopicRecordNameStrategy.
The payload itself is not decoded; what is checked is that consumers will
find the schema. A null value (a tombstone) passes. The registry's id index
is a dict lookup per distinct frame of a batch; it is read afresh from the
streams only when an id is not found, so a schema registered a moment ago
(or brought by a replica link) is seen.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable

from kafkacompat.protocol.records import Record

from .log import SchemaHost
from .registry import Registry, registry_of

_ID = struct.Struct(">bI")
TOPIC, RECORD = "TopicNameStrategy", "RecordNameStrategy"  # and TopicRecordNameStrategy
Expected = Callable[[int], set[str]]  # schema id -> the subjects it may be registered under for this topic


def expected_subjects(registry: Registry, names: set[str], what: str, strategy: str) -> Expected:
    """The subjects a key or value's schema id must be registered under, by the topic's strategy."""
    if strategy == TOPIC:
        subjects = {f"{n}-{what}" for n in names}
        return lambda schema_id: subjects

    def by_record(schema_id: int) -> set[str]:
        record = registry.record_name(schema_id)
        if record is None:
            return set()
        return {record} if strategy == RECORD else {f"{n}-{record}" for n in names}

    return by_record


def _problem(data: bytes | None, expected: Expected, index: dict[int, frozenset[str]], what: str) -> str | None:
    """Why one key or value fails (None: it passes)."""
    if data is None:
        return None
    if len(data) < 5 or data[0] != 0:
        return f"the {what} is not framed with a schema id (magic byte 0 and a 4-byte id)"
    schema_id = _ID.unpack_from(data)[1]
    holders = index.get(schema_id)
    if holders is None:
        return f"the {what}'s schema id {schema_id} is not registered"
    subjects = expected(schema_id)
    if holders.isdisjoint(subjects):
        return f"the {what}'s schema id {schema_id} is not registered under subject {min(subjects, default='-')}"
    return None


async def refusals(cluster: SchemaHost, topic_names: Iterable[str], records: Iterable[Record], *,
                   keys: str | None, values: str | None) -> list[tuple[int, str]]:
    """(index in its batch, why) of each record refused.

    `topic_names` are the names the topic goes by; `keys` and `values` the
    subject name strategy each is checked by (None: not checked).
    """
    registry = registry_of(cluster)
    names = set(topic_names)
    checks = [(what, expected_subjects(registry, names, what, strategy))
              for what, strategy in (("key", keys), ("value", values)) if strategy is not None]
    listed = list(records)
    found = _all_problems(listed, registry.subjects_by_id(), checks)
    if found and await registry.log.catch_up():  # something new in the streams: look again
        found = _all_problems(listed, registry.subjects_by_id(), checks)
    return found


def _all_problems(records: list[Record], index: dict[int, frozenset[str]],
                  checks: list[tuple[str, Expected]]) -> list[tuple[int, str]]:
    """Each record's verdict, decided once per distinct 5-byte frame (a batch mostly carries one schema id)."""
    found = []
    verdicts: dict[tuple[str, bytes | None], str | None] = {}
    for position, record in enumerate(records):
        for what, expected in checks:
            data = record.key if what == "key" else record.value
            frame = None if data is None else data[:5]
            if (what, frame) not in verdicts:
                verdicts[what, frame] = _problem(data, expected, index, what)
            if verdicts[what, frame] is not None:
                found.append((position, verdicts[what, frame]))
                break
    return found
