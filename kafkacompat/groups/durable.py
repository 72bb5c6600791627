"""Group state kept in the store, so that the next coordinator of a group continues it.

Kafka writes a group's metadata to __consumer_offsets and a coordinator
that takes over a partition of that topic replays it: members keep their
member ids, generation (classic groups) or member epochs (KIP-848 consumer
groups) and assignments, heartbeat to the new coordinator and go on
without a rebalance. Here the same state is one JSON record per group in
the `groups` state table of the default stream (`Store.put_state`: a file
in the stream's data path on disk, rows in PostgreSQL on the cloud
engine), written when it changes as Kafka writes it:

- a classic group when it becomes Stable (the leader's SyncGroup, with
  every member's assignment), when it becomes Empty, when a static member
  comes back under a new member id, and when it is deleted; while it
  rebalances the last stable generation stays stored (as on Kafka, a
  coordinator taking over mid-rebalance starts from it);
- a consumer group at every change of its epochs, members or assignments;
- a Streams group (KIP-1071) likewise: what Kafka splits into its
  StreamsGroupMetadata, Topology, MemberMetadata, TargetAssignment and
  CurrentAssignment records is one record here, with the task counts the
  topology was last configured with, the standby count of the last target
  assignment, and what each member last said it owns (Kafka's records do
  not keep that; a member only resends it when it changes).

Writes of many groups are gathered into one put_state call; a member is
answered once the state it acts on is written (SyncGroup,
ConsumerGroupHeartbeat wait for `flushed`). Only the group's coordinator
writes (`may_write`), so a broker that lost a group leaves its state alone.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from kafkacompat import storage
from kafkacompat.storage import Store

from .assignors import Assignment
from .consumer_group import ClassicMembership, ConsumerGroup, ConsumerMember, MemberState
from .group import Group, GroupState, Member
from .streams_group import MemberState as StreamsMemberState
from .streams_group import StreamsGroup, StreamsMember, Tasks
from .streams_topology import InternalTopic, Subtopology, Topology

log = logging.getLogger(__name__)

TABLE = "groups"
FLUSH_WAIT_S = 10.0  # longest a member's answer waits for its group's state to be written
HELD_RETRY_S = 0.1  # how often a write held while this broker is not the group's coordinator is tried again
Record = dict[str, Any]
_UNSET = object()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str) -> bytes:
    return base64.b64decode(text)


def _assignment_record(assignment: Assignment) -> dict[str, list[int]]:
    return {topic.hex: sorted(parts) for topic, parts in sorted(assignment.items()) if parts}


def _assignment(record: dict[str, list[int]]) -> dict[uuid.UUID, frozenset[int]]:
    return {uuid.UUID(hex=topic): frozenset(parts) for topic, parts in record.items()}


# classic groups -------------------------------------------------------------------


def classic_record(group: Group) -> Record | None:
    """What Kafka's GroupMetadataValue holds; None when there is nothing beyond committed offsets
    to keep (a group only offsets know). Called for Stable and Empty groups only (see module doc)."""
    if group.is_(GroupState.DEAD) or (group.protocol_type is None and not group.members):
        return None
    return {
        "type": "classic",
        "generation": group.generation,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol_name,
        "leader": group.leader_id,
        "state_ms": group.state_timestamp_ms,
        "members": [
            {
                "id": m.member_id, "instance": m.instance_id, "client_id": m.client_id, "host": m.client_host,
                "session_ms": m.session_timeout_ms, "rebalance_ms": m.rebalance_timeout_ms,
                "protocols": [[name, _b64(data)] for name, data in m.protocols],
                "assignment": _b64(m.assignment),
            }
            for m in group.members.values()
        ] if group.is_(GroupState.STABLE) else [],
    }


def classic_group(group_id: str, record: Record) -> Group:
    """The group a record describes: Stable with its members, or Empty (Kafka's loadGroup)."""
    group = Group(group_id, record["state_ms"])
    group.generation = record["generation"]
    group.protocol_type = record["protocol_type"]
    for m in record["members"]:
        group.add(Member(
            member_id=m["id"], instance_id=m["instance"], client_id=m["client_id"], client_host=m["host"],
            session_timeout_ms=m["session_ms"], rebalance_timeout_ms=m["rebalance_ms"],
            protocol_type=record["protocol_type"], protocols=[(name, _unb64(data)) for name, data in m["protocols"]],
            assignment=_unb64(m["assignment"]),
        ))
    if group.members:
        group.protocol_name = record["protocol"]
        group.leader_id = record["leader"] if record["leader"] in group.members else next(iter(group.members))
        group.state = GroupState.STABLE
    else:
        group.leader_id = None
    return group


# consumer groups ------------------------------------------------------------------


def consumer_record(group: ConsumerGroup) -> Record:
    """Epochs, members, their current and target assignments (Kafka's consumer group records, as one)."""
    members = []
    for m in group.members.values():
        members.append({
            "id": m.member_id, "instance": m.instance_id, "rack": m.rack_id, "client_id": m.client_id,
            "host": m.client_host, "rebalance_ms": m.rebalance_timeout_ms, "topics": list(m.subscribed_topic_names),
            "regex": m.subscribed_topic_regex, "assignor": m.server_assignor, "epoch": m.member_epoch,
            "previous_epoch": m.previous_member_epoch, "state": m.state.value,
            "assigned": _assignment_record(m.assigned), "revoking": _assignment_record(m.pending_revocation),
            "target": _assignment_record(group.target.get(m.member_id, {})),
            "classic": None if m.classic is None else {
                "session_ms": m.classic.session_timeout_ms,
                "protocols": [[name, _b64(data)] for name, data in m.classic.protocols],
            },
        })
    return {
        "type": "consumer",
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "state_ms": group.state_timestamp_ms,
        "subscribed": {topic.hex: [name, count] for topic, (name, count) in sorted(group.subscribed.items())},
        "members": members,
    }


def consumer_group(group_id: str, record: Record) -> ConsumerGroup:
    group = ConsumerGroup(group_id, record["state_ms"])
    group.group_epoch = record["group_epoch"]
    group.assignment_epoch = record["assignment_epoch"]
    group.subscribed = {uuid.UUID(hex=t): (name, count) for t, (name, count) in record["subscribed"].items()}
    for m in record["members"]:
        classic = m["classic"]
        group.put(ConsumerMember(
            m["id"], instance_id=m["instance"], rack_id=m["rack"], client_id=m["client_id"], client_host=m["host"],
            rebalance_timeout_ms=m["rebalance_ms"], subscribed_topic_names=tuple(m["topics"]),
            subscribed_topic_regex=m["regex"], server_assignor=m["assignor"], member_epoch=m["epoch"],
            previous_member_epoch=m["previous_epoch"], state=MemberState(m["state"]),
            assigned=_assignment(m["assigned"]), pending_revocation=_assignment(m["revoking"]),
            classic=None if classic is None else ClassicMembership(
                classic["session_ms"], tuple((name, _unb64(data)) for name, data in classic["protocols"])),
        ))
        group.target[m["id"]] = _assignment(m["target"])
    return group


# streams groups -------------------------------------------------------------------


def _tasks_record(tasks: Tasks) -> list[list[str | int]]:
    return [[role, sub, p] for role, sub, p in sorted(tasks)]


def _tasks(record: list[list[Any]]) -> Tasks:
    return frozenset((str(role), str(sub), int(p)) for role, sub, p in record)


def _topic_record(topic: InternalTopic) -> list[Any]:
    return [topic.name, topic.partitions, [list(kv) for kv in topic.configs]]


def _topic(record: list[Any]) -> InternalTopic:
    name, partitions, configs = record
    return InternalTopic(name, partitions, tuple((k, v) for k, v in configs))


def _topology_record(topology: Topology | None) -> Record | None:
    if topology is None:
        return None
    return {"epoch": topology.epoch, "subtopologies": [
        {"id": sub.subtopology_id, "sources": list(sub.source_topics), "sinks": list(sub.repartition_sinks),
         "repartition": [_topic_record(t) for t in sub.repartition_sources],
         "changelogs": [_topic_record(t) for t in sub.changelogs]}
        for sub in topology.subtopologies]}


def _topology(record: Record | None) -> Topology | None:
    if record is None:
        return None
    return Topology(record["epoch"], tuple(
        Subtopology(sub["id"], tuple(sub["sources"]), tuple(sub["sinks"]),
                    tuple(_topic(t) for t in sub["repartition"]), tuple(_topic(t) for t in sub["changelogs"]))
        for sub in record["subtopologies"]))


def streams_record(group: StreamsGroup) -> Record:
    """Epochs, topology, members with their current and target tasks (Kafka's streams group records, as one)."""
    members = [{
        "id": m.member_id, "process": m.process_id, "instance": m.instance_id, "rack": m.rack_id,
        "client_id": m.client_id, "host": m.client_host, "rebalance_ms": m.rebalance_timeout_ms,
        "topology_epoch": m.topology_epoch, "endpoint": list(m.user_endpoint) if m.user_endpoint else None,
        "tags": [list(kv) for kv in m.client_tags], "epoch": m.member_epoch, "previous_epoch": m.previous_member_epoch,
        "state": m.state.value, "assigned": _tasks_record(m.assigned), "revoking": _tasks_record(m.pending_revocation),
        "reported": _tasks_record(m.reported), "target": _tasks_record(group.target.get(m.member_id, frozenset())),
    } for m in group.members.values()]
    return {
        "type": "streams",
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "state_ms": group.state_timestamp_ms,
        "topology": _topology_record(group.topology),
        "tasks": dict(sorted(group.tasks.items())),
        "standbys": group.standbys,
        "members": members,
    }


def streams_group(group_id: str, record: Record) -> StreamsGroup:
    group = StreamsGroup(group_id, record["state_ms"])
    group.group_epoch = record["group_epoch"]
    group.assignment_epoch = record["assignment_epoch"]
    group.topology = _topology(record["topology"])
    group.tasks = {sub: int(count) for sub, count in record["tasks"].items()}
    group.standbys = record["standbys"]
    for m in record["members"]:
        endpoint = m["endpoint"]
        group.put(StreamsMember(
            m["id"], process_id=m["process"], instance_id=m["instance"], rack_id=m["rack"], client_id=m["client_id"],
            client_host=m["host"], rebalance_timeout_ms=m["rebalance_ms"], topology_epoch=m["topology_epoch"],
            user_endpoint=(endpoint[0], int(endpoint[1])) if endpoint else None,
            client_tags=tuple((k, v) for k, v in m["tags"]), member_epoch=m["epoch"],
            previous_member_epoch=m["previous_epoch"], state=StreamsMemberState(m["state"]),
            assigned=_tasks(m["assigned"]), pending_revocation=_tasks(m["revoking"]), reported=_tasks(m["reported"]),
        ))
        group.target[m["id"]] = _tasks(m["target"])
    return group


# writing ----------------------------------------------------------------------------


class GroupStateWriter:
    """Writes the latest record of each changed group, many groups per store write."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.may_write: Callable[[str], bool] = lambda group_id: True  # is this broker the group's coordinator
        self._saved: dict[str, Record] = {}  # what the store holds, as far as this broker knows
        self._pending: dict[str, Record | None] = {}  # to write next
        self._writing: dict[str, Record | None] = {}  # being written now
        self._next: asyncio.Future[None] | None = None  # resolved when _pending is written
        self._current: asyncio.Future[None] | None = None  # resolved when _writing is written
        self._task: asyncio.Task[None] | None = None
        self._closing = False  # writes this broker may not make now are dropped, not held

    def stored(self) -> dict[str, Record]:
        """Every group record in the store (read afresh where other brokers write it too)."""
        return self.store.get_state(self.store.default_stream, TABLE)

    async def reload(self) -> dict[str, Record]:
        await self.store.reload_state(self.store.default_stream, TABLE)
        return self.stored()

    def loaded(self, group_id: str, record: Record) -> None:
        """The coordinator restored this group from `record`: no need to write it again."""
        self._saved[group_id] = record

    def forget(self, group_ids: Iterable[str]) -> None:
        """This broker no longer coordinates these groups: drop what it meant to write."""
        for group_id in group_ids:
            self._saved.pop(group_id, None)
            self._pending.pop(group_id, None)
            self._writing.pop(group_id, None)  # a write under way finishes; a held one is not tried again

    def save(self, group_id: str, record: Record | None) -> None:
        """Queue the group's record (None: it is gone) unless the store already holds it."""
        latest = self._pending.get(group_id, _UNSET)
        if latest is _UNSET:
            latest = self._writing.get(group_id, _UNSET)
        if latest is _UNSET:
            latest = self._saved.get(group_id)
        if latest == record:
            return
        self._pending[group_id] = record
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._write(), name="group state writer")

    async def flushed(self, group_id: str) -> None:
        """Return once what was queued for the group is written (or its write failed, logged, or
        the broker let the group go), waiting at most FLUSH_WAIT_S for a write held by a late lease."""
        deadline = asyncio.get_running_loop().time() + FLUSH_WAIT_S
        while True:
            if group_id in self._writing and self._current is not None:
                done = self._current
            elif group_id in self._pending and self._next is not None:
                done = self._next
            else:
                return
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return
            await asyncio.wait([asyncio.shield(done)], timeout=left)

    async def _write(self) -> None:
        try:
            while self._pending:
                self._writing, self._pending = self._pending, {}
                self._current, self._next = self._next, None
                batch = {g: r for g, r in self._writing.items() if self.may_write(g)}
                held = {g: r for g, r in self._writing.items() if g not in batch}
                try:
                    if batch:
                        # written, not fsynced, before answering (as Kafka does not fsync its log):
                        # a power loss may cost the latest state, and then members rejoin
                        await self.store.put_state(self.store.default_stream, TABLE, batch, durable=False)
                    for group_id, record in batch.items():
                        if group_id not in self._writing:  # let go of while it was written
                            continue
                        if record is None:
                            self._saved.pop(group_id, None)
                        else:
                            self._saved[group_id] = record
                except storage.StorageError as exc:
                    log.warning("group state of %s not written (%s): a coordinator taking over starts from the "
                                "previous state", sorted(batch), exc)
                finally:
                    held = {g: r for g, r in held.items() if g in self._writing}  # not forgotten meanwhile
                    self._writing = {}
                    if self._current is not None:
                        self._current.set_result(None)
                        self._current = None
                if held and not self._closing:
                    # not the coordinator right now: its lease may be late to renew on a busy machine. Kept
                    # until it is again, or until the broker lets the group go (forget drops them)
                    for group_id, record in held.items():
                        self._pending.setdefault(group_id, record)
                    if self._next is None:
                        self._next = asyncio.get_running_loop().create_future()
                    await asyncio.sleep(HELD_RETRY_S)
        finally:
            self._task = None
            if self._next is not None and not self._pending:  # held writes let go of: release their waiters
                self._next.set_result(None)
                self._next = None

    async def close(self) -> None:
        """Finish the writes under way (a clean stop keeps the latest state this broker may still write)."""
        self._closing = True
        try:
            while self._task is not None:
                await asyncio.shield(self._task)
        finally:
            self._closing = False

    async def forget_all(self) -> None:
        """Delete every group record (the test broker's reset)."""
        await self.close()
        gone: dict[str, dict | None] = dict.fromkeys(self.stored())
        if gone:
            await self.store.put_state(self.store.default_stream, TABLE, gone)
        self._saved.clear()
