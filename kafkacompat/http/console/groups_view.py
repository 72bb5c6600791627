"""Consumer groups as the console shows them: members with their partitions, and lag per partition.

Read straight from the broker's coordinator (classic and KIP-848 groups)
and the committed offsets kept as cursors; lag is the partition's end
offset minus the committed offset, as kafka-consumer-groups prints it.
In a cluster only the group's coordinator holds its members and latest
offsets: a broker that is not it asks it over the Kafka port, as the REST
proxy does (rest_v3.describe_group and group_lags), instead of showing its
own stale copy.
"""

from __future__ import annotations

from typing import Any

from ...broker.cluster import Cluster, TopicError
from ...groups.consumer_protocol import CONSUMER_PROTOCOL_TYPE, parse_assignment
from ...operations.stream_views import cursor_views
from ...topic_names import canonical_name
from ..rest_errors import RestError
from ..rest_v3 import cluster_groups, describe_group, group_lags


async def group_ids(cluster: Cluster) -> list[dict[str, Any]]:
    """Every group of the cluster: live ones with their state (as their coordinators list them), and
    those that only have committed offsets."""
    rows = {g.group_id: {"group": g.group_id, "type": g.group_type.lower() or "classic", "state": g.group_state,
                         "protocol_type": g.protocol_type}
            for g in await cluster_groups(cluster) if g.group_type.lower() != "share"}  # not consumer groups
    for group in cluster.groups.offsets.groups():
        rows.setdefault(group, {"group": group, "type": "classic", "state": "Empty", "protocol_type": ""})
    return [rows[group] for group in sorted(rows)]


def _members(cluster: Cluster, group_id: str) -> tuple[str, str, list[dict[str, Any]]]:
    """(type, state, members) with each member's assigned partitions as (stream, topic, partition)."""
    coordinator = cluster.groups
    if group_id in coordinator.consumer.groups:
        described = coordinator.consumer.describe(group_id)
        members = []
        for entry in described.members:
            member = entry.member
            names = coordinator.consumer.topic_names(member.assigned)
            members.append({
                "member_id": member.member_id, "instance_id": member.instance_id,
                "client_id": member.client_id, "host": member.client_host,
                "partitions": _resolved(cluster, ((names[t], p) for t, ps in member.assigned.items() for p in ps)),
            })
        return "consumer", described.state, members
    summary = coordinator.describe(group_id)
    members = []
    for member in summary.members:
        assignment = None
        if summary.protocol_type == CONSUMER_PROTOCOL_TYPE and member.assignment:
            assignment = parse_assignment(member.assignment)
        members.append({
            "member_id": member.member_id, "instance_id": member.instance_id,
            "client_id": member.client_id, "host": member.client_host,
            "partitions": _resolved(cluster, ((t, p) for t, ps in (assignment or {}).items() for p in ps)),
        })
    return "classic", summary.state, members


def _resolved(cluster: Cluster, pairs: Any) -> list[tuple[str, str, int]]:
    """(stream, topic, partition) for client-spelled (name, partition) pairs; unresolvable names are kept as given."""
    out = []
    for name, partition in pairs:
        try:
            stream, topic = cluster.split(name)
        except TopicError:
            stream, topic = "", name
        out.append((stream, topic, partition))
    return sorted(out)


async def group_view(cluster: Cluster, group_id: str) -> dict[str, Any] | None:
    """A group's members and, per committed partition, offset, end offset, lag and owner; None if unknown.
    RestError when its coordinator cannot be asked."""
    if cluster.coordinates(group_id):
        return await _local_view(cluster, group_id)
    try:
        group = await describe_group(cluster, group_id)
    except RestError as exc:
        if exc.status == 404:
            return None
        raise
    members = [{"member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id, "host": m.host,
                "partitions": _labels(cluster, _resolved(cluster, ((t, p) for t, ps in m.assignment.items()
                                                                    for p in ps)))}
               for m in group.members]
    offsets = []
    for lag in await group_lags(cluster, group):
        ((stream, topic, index),) = _resolved(cluster, [(lag["topic_name"], lag["partition_id"])])
        offsets.append({"group": group_id, "stream": stream, "topic": topic, "partition": index,
                        "name": canonical_name(stream, topic, cluster.default_stream) if stream else topic,
                        "offset": lag["current_offset"], "end_offset": lag["log_end_offset"], "lag": lag["lag"],
                        "owner": lag["consumer_id"] or None})
    return {"group": group_id, "type": group.type.lower(), "state": group.kafka_state, "members": members,
            "offsets": offsets, "total_lag": sum(row["lag"] for row in offsets)}


def _labels(cluster: Cluster, partitions: list[tuple[str, str, int]]) -> list[str]:
    """`name-partition` for (stream, topic, partition) triples, each topic named as clients name it."""
    default = cluster.default_stream
    return [canonical_name(s, t, default) + f"-{p}" if s else f"{t}-{p}" for s, t, p in partitions]


async def _local_view(cluster: Cluster, group_id: str) -> dict[str, Any] | None:
    kind, state, members = _members(cluster, group_id)
    committed = cluster.groups.offsets.all(group_id)
    if state == "Dead" and not committed:
        return None
    owner = {part: m["member_id"] for m in members for part in m["partitions"]}
    default = cluster.default_stream
    offsets = []
    ordered = sorted(committed, key=lambda sc: (sc[0], sc[1].topic, sc[1].partition))
    rows = await cursor_views(cluster, [(stream, group_id, cursor) for stream, cursor in ordered])
    for (stream, cursor), row in zip(ordered, rows):
        row["stream"] = stream
        row["name"] = canonical_name(stream, cursor.topic, default)
        row["owner"] = owner.get((stream, cursor.topic, cursor.partition))
        offsets.append(row)
    for m in members:
        m["partitions"] = _labels(cluster, m["partitions"])
    return {"group": group_id, "type": kind, "state": "Empty" if state == "Dead" else state,
            "members": members, "offsets": offsets,
            "total_lag": sum(row["lag"] or 0 for row in offsets)}
