"""A KIP-1071 Streams group's topology and what it needs from the broker, after Kafka's InternalTopicManager.

A Streams member sends its topology in its first heartbeat: subtopologies
with their source topics, the repartition topics they write and read, and
their changelog topics. The broker owns the internal (repartition and
changelog) topics: it derives their partition counts (a repartition topic
has as many partitions as the subtopology writing it has tasks, a changelog
as many as its own subtopology), creates the missing ones, and counts each
subtopology's tasks (the most partitions among its input topics). Pure:
topic sizes come from a lookup the caller passes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping


@dataclasses.dataclass(frozen=True, slots=True)
class InternalTopic:
    name: str
    partitions: int  # 0: derived by the broker
    configs: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sinks: tuple[str, ...] = ()
    repartition_sources: tuple[InternalTopic, ...] = ()
    changelogs: tuple[InternalTopic, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def topic_names(self) -> set[str]:
        """Every topic the topology reads or writes (source, repartition, changelog)."""
        names: set[str] = set()
        for sub in self.subtopologies:
            names.update(sub.source_topics, sub.repartition_sinks)
            names.update(t.name for t in (*sub.repartition_sources, *sub.changelogs))
        return names


@dataclasses.dataclass(frozen=True, slots=True)
class ConfiguredTopology:
    tasks: Mapping[str, int]  # subtopology id -> number of tasks (empty while topics are missing)
    to_create: Mapping[str, tuple[int, dict[str, str]]]  # internal topic -> (partitions, configs)
    missing_sources: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        return not self.missing_sources and not self.to_create


def configure(topology: Topology, partitions_of: Callable[[str], int | None]) -> ConfiguredTopology:
    """Task counts and the internal topics to create, given each existing topic's partition count."""
    missing = sorted({t for sub in topology.subtopologies for t in sub.source_topics if partitions_of(t) is None})
    if missing:
        return ConfiguredTopology({}, {}, tuple(missing))
    repartition = _repartition_partitions(topology, partitions_of)
    tasks: dict[str, int] = {}
    for sub in topology.subtopologies:
        counts = [partitions_of(t) or 0 for t in sub.source_topics]
        counts += [repartition.get(t.name, 0) for t in sub.repartition_sources]
        tasks[sub.subtopology_id] = max(counts, default=0)
    to_create: dict[str, tuple[int, dict[str, str]]] = {}
    for sub in topology.subtopologies:
        for topic in sub.repartition_sources:
            if partitions_of(topic.name) is None and repartition.get(topic.name):
                to_create[topic.name] = (repartition[topic.name], dict(topic.configs))
        for topic in sub.changelogs:
            count = topic.partitions or tasks[sub.subtopology_id]
            if partitions_of(topic.name) is None and count > 0:
                to_create[topic.name] = (count, dict(topic.configs))
    return ConfiguredTopology(tasks, to_create)


def _repartition_partitions(topology: Topology, partitions_of: Callable[[str], int | None]) -> dict[str, int]:
    """Each repartition topic's partitions: as asked, as it exists, else the tasks of the subtopologies writing it."""
    known: dict[str, int] = {}
    pending: set[str] = set()
    for sub in topology.subtopologies:
        for topic in sub.repartition_sources:
            existing = partitions_of(topic.name)
            if topic.partitions > 0 or existing is not None:
                known[topic.name] = topic.partitions if topic.partitions > 0 else existing or 0
            else:
                pending.add(topic.name)
    progress = True
    while pending and progress:  # a chain of repartitions resolves from the source topics downstream
        progress = False
        for name in sorted(pending):
            writers = [sub for sub in topology.subtopologies if name in sub.repartition_sinks]
            counts = [_tasks_if_known(sub, known, partitions_of) for sub in writers]
            if writers and all(c is not None for c in counts):
                known[name] = max(c or 0 for c in counts)
                pending.discard(name)
                progress = True
    return known


def _tasks_if_known(sub: Subtopology, known: Mapping[str, int], partitions_of: Callable[[str], int | None]) -> int | None:
    counts = [partitions_of(t) or 0 for t in sub.source_topics]
    for topic in sub.repartition_sources:
        if topic.name not in known:
            return None
        counts.append(known[topic.name])
    return max(counts, default=0)
