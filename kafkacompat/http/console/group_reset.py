"""Resetting a consumer group's committed offsets from its page: a dry-run preview, then a confirmed reset.

The modes and their arithmetic are the CLI's own (`kafkacompat group
reset-offsets`: to the earliest, the latest, an offset, a time, or shifted
by N, clamped into each partition's log) through operations.offset_reset.reset_target;
only where the figures come from differs: the CLI asks a broker over the
Kafka protocol, the console reads its own broker's cursors and partitions.
As the CLI, only an inactive group (Empty) may be reset.

The preview (GET, the group page with reset=...) needs what the page needs
(DESCRIBE on the group) and shows only the topics the principal may
describe. The reset itself (POST) is one OffsetCommit through the broker's
handler as the request's principal, so it needs READ on the group and on
each topic, as Kafka's tool does. On a broker that is not the group's
coordinator that OffsetCommit is checked here first and only then sent to
the coordinator over its Kafka port (kafka_calls.coordinator_call), which
authorizes it as this broker's connection, not as the console's user.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from kio.schema.errors import ErrorCode

from ...broker.cluster import Cluster, TopicError
from ...operations.offset_reset import NoCommittedOffset, reset_target
from ...security.acls import Operation
from ...topic_names import canonical_name
from ..kafka_calls import build, coordinator_call
from ..rest_errors import RestError
from .groups_view import group_view
from .permission import authorizing, may_topic
from .units import parse_time

OFFSET_COMMIT = 8
MODES = {"earliest": "to the earliest offset", "latest": "to the end", "offset": "to offset N",
         "shift": "shifted by N (N < 0 goes back)", "datetime": "to a time (UTC unless a zone is given)"}


class ResetError(ValueError):
    """A reset that cannot be planned: shown beside the form."""


@dataclass(frozen=True)
class Row:
    stream: str
    topic: str
    partition: int
    name: str  # as clients name the topic
    current: int | None
    new: int


def cli_args(mode: str, value: str) -> argparse.Namespace:
    """The CLI's parsed options for a mode and its value."""
    args = argparse.Namespace(to_earliest=mode == "earliest", to_latest=mode == "latest", to_offset=None,
                              to_datetime=None, shift_by=None)
    if mode in ("offset", "shift"):
        try:
            number = int(value.strip())
        except ValueError:
            raise ResetError(f"N must be a whole number, not {value!r}") from None
        setattr(args, "to_offset" if mode == "offset" else "shift_by", number)
    elif mode == "datetime":
        args.to_datetime = parse_time(value.strip())
    elif mode not in MODES:
        raise ResetError(f"reset mode {mode!r} is not one of {', '.join(MODES)}")
    return args


async def plan(request: web.Request, cluster: Cluster, group: str, mode: str, value: str,
               topic: str) -> list[Row]:
    """Each partition in scope with its committed and new offset; ResetError when it cannot be reset."""
    args = cli_args(mode, value)
    try:
        view = await group_view(cluster, group)
    except RestError as exc:
        raise ResetError(exc.message) from None
    if view is not None and view["state"] not in ("Empty", "Dead"):
        raise ResetError(f"assignments can only be reset if the group '{group}' is inactive, but the current "
                         f"state is {view['state']}; stop its consumers first")
    committed = {(stream, c.topic, c.partition): c.offset for stream, c in cluster.groups.offsets.all(group)}
    rows = []
    for stream, name, index in _scope(cluster, committed, topic):
        if authorizing(request) and not may_topic(request, Operation.DESCRIBE, stream, name, audit=False):
            continue
        partition = await cluster.readable_partition(stream, name, index)
        low, high = partition.log_start_offset, partition.high_watermark
        found = None
        if args.to_datetime is not None:
            hit = await partition.offset_for_timestamp(args.to_datetime)
            found = hit.offset if hit is not None else None
        label = canonical_name(stream, name, cluster.default_stream)
        try:
            new = reset_target(args, f"{label}-{index}", committed.get((stream, name, index)), low, high, found)
        except NoCommittedOffset as exc:
            raise ResetError(str(exc)) from None
        rows.append(Row(stream, name, index, label, committed.get((stream, name, index)), new))
    if not rows:
        raise ResetError(f"consumer group '{group}' has no committed offsets here: name a topic")
    return rows


def _scope(cluster: Cluster, committed: dict[tuple[str, str, int], int], topic: str) -> list[tuple[str, str, int]]:
    """The partitions a reset covers: the named topic's (all, or `topic:0,2`), else every committed one."""
    if not topic.strip():
        return sorted(committed)
    name, _, numbers = topic.strip().rpartition(":") if _has_partitions(topic) else (topic.strip(), "", "")
    try:
        info = cluster.lookup(name).info
    except TopicError as exc:
        raise ResetError(str(exc)) from None
    if info is None:
        raise ResetError(f"topic {name} does not exist")
    indexes = [int(n) for n in numbers.split(",")] if numbers else list(range(info.partitions))
    for index in indexes:
        if index >= info.partitions:
            raise ResetError(f"topic {name} has {info.partitions} partition(s): there is no partition {index}")
    return [(info.stream, info.name, index) for index in indexes]


def _has_partitions(text: str) -> bool:
    head, sep, tail = text.strip().rpartition(":")
    return bool(sep and head and tail) and all(n.isdigit() for n in tail.split(",")) and \
        not (head.startswith("/") and ":" not in head)  # '/stream:7' is topic 7 of /stream


async def commit(cluster: Cluster, group: str, rows: list[Row]) -> None:
    """One OffsetCommit of the new offsets, as an admin client commits for an empty group (generation -1)."""
    by_topic: dict[str, list[Any]] = {}
    for row in rows:
        by_topic.setdefault(row.name, []).append(build(
            OFFSET_COMMIT, "OffsetCommitRequestPartition", partition_index=row.partition, committed_offset=row.new,
            committed_leader_epoch=-1, committed_metadata=""))
    answer = await coordinator_call(cluster, OFFSET_COMMIT, build(
        OFFSET_COMMIT, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=tuple(build(OFFSET_COMMIT, "OffsetCommitRequestTopic", name=name, partitions=tuple(parts))
                     for name, parts in by_topic.items())), group)
    failed = [f"{topic.name}-{part.partition_index}: {ErrorCode(part.error_code).name}"
              for topic in answer.topics for part in topic.partitions if part.error_code]
    if failed:
        raise ResetError("the broker refused the reset of " + ", ".join(failed))
