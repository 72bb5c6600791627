"""REST v2 consumer instances: Kafka consumers living in the broker, driven over HTTP.

Each instance is a real member of its consumer group: it finds the
coordinator, joins with the classic "consumer" protocol (the range
assignor when it leads), syncs, heartbeats in the background, fetches and
commits, all through the broker's own handlers, so Kafka clients in the
same group share partitions with it and see it in DescribeGroups. A manual
assignment (`assignments`) fetches without joining, as KafkaConsumer.assign
does. Instances idle for rest_consumer_instance_timeout_ms are deleted
(Confluent's consumer.instance.timeout.ms); using one afterwards answers
40403, as does using one another principal created (its URL is no key).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import re
import time
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kafkacompat.protocol.records import Record, iter_records

from ..broker.cluster import Cluster
from ..groups.assignors import RANGE, MemberSpec, assign
from ..groups.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    encode_assignment,
    encode_subscription,
    parse_assignment,
    parse_subscription,
)
from .kafka_calls import NO_TOPIC_ID, ask_leaders, build, call, coordinator_call, list_offsets_request
from .principal import current_principal
from .rest_errors import RestError, check, consumer_instance_not_found, kafka_error

log = logging.getLogger(__name__)

FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 1, 2, 3, 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
SESSION_TIMEOUT = datetime.timedelta(seconds=30)
HEARTBEAT_EVERY_S = 3.0
REBALANCE_TIMEOUT = datetime.timedelta(seconds=30)
GROUP_CALL_TIMEOUT_S = REBALANCE_TIMEOUT.total_seconds() + 10  # a JoinGroup waits up to the rebalance timeout
EARLIEST, LATEST = -2, -1
Partition = tuple[str, int]


@dataclasses.dataclass(slots=True)
class InstanceConfig:
    format: str  # "binary", "json" or "string"
    auto_offset_reset: str  # "earliest", "latest" or "none"
    auto_commit: bool
    fetch_min_bytes: int
    request_timeout_ms: int


class ConsumerInstance:
    """One REST consumer: its subscription or assignment, positions, and group membership."""

    def __init__(self, cluster: Cluster, group: str, name: str, config: InstanceConfig) -> None:
        self.cluster, self.group, self.name, self.config = cluster, group, name, config
        self.client_id = f"rest-consumer-{name}"
        self.principal = current_principal()  # only its creator may use it (its Kafka calls are authorized as it)
        self.last_used = time.monotonic()
        self.topics: list[str] = []  # subscribed topics (after a pattern is resolved)
        self.pattern: str | None = None
        self.manual: list[Partition] | None = None  # assign(): fixed partitions, no membership
        self.assigned: list[Partition] = []
        self.positions: dict[Partition, int] = {}
        self.member_id = ""
        self.generation = -1
        self._membership: asyncio.Task[None] | None = None
        self._joined = asyncio.Event()
        self.lock = asyncio.Lock()  # one HTTP call at a time per instance, as KafkaConsumer is single-threaded

    def stop(self) -> None:
        """Stop heartbeating without leaving (the broker is stopping)."""
        if self._membership is not None:
            self._membership.cancel()

    def touch(self) -> None:
        self.last_used = time.monotonic()

    async def _group_call(self, api_key: int, body: Any) -> Any:
        """A group request as this member, answered by the group's coordinator whichever broker this
        is (a REST user reaches any broker of a cluster); the user's ACLs are checked here first."""
        return await coordinator_call(self.cluster, api_key, body, self.group, client_id=self.client_id,
                                      timeout_s=GROUP_CALL_TIMEOUT_S)

    # --- subscription and membership ---------------------------------------------------------

    async def subscribe(self, topics: list[str], pattern: str | None) -> None:
        await self.unsubscribe()
        self.topics, self.pattern = list(topics), pattern
        self._joined.clear()
        answer = await call(self.cluster, FIND_COORDINATOR, build(FIND_COORDINATOR, key_type=0,
                                                                  coordinator_keys=(self.group,)),
                            client_id=self.client_id)
        check(answer.coordinators[0].error_code, answer.coordinators[0].error_message)
        self._membership = asyncio.create_task(self._member(), name=f"rest consumer {self.group}/{self.name}")

    async def unsubscribe(self) -> None:
        """Leave the group (if joined) and forget subscription, assignment and positions."""
        if self._membership is not None:
            self._membership.cancel()
            try:
                await self._membership
            except asyncio.CancelledError:
                pass
            except Exception:  # noqa: BLE001 - logged where it happened
                pass
            self._membership = None
        if self.member_id:
            member = build(LEAVE_GROUP, "MemberIdentity", member_id=self.member_id, group_instance_id=None,
                           reason="the REST consumer unsubscribed or was deleted")
            try:
                await self._group_call(LEAVE_GROUP, build(LEAVE_GROUP, group_id=self.group, members=(member,)))
            except Exception:  # noqa: BLE001 - leaving is best effort: the session times out anyway
                log.debug("LeaveGroup for %s failed", self.name, exc_info=True)
        self.member_id, self.generation = "", -1
        self.topics, self.pattern, self.assigned, self.positions = [], None, [], {}
        self.manual = None

    async def _subscribed_topics(self) -> list[str]:
        if self.pattern is None:
            return self.topics
        answer = await call(self.cluster, METADATA, build(METADATA, topics=None, allow_auto_topic_creation=False,
                                                          include_topic_authorized_operations=False))
        regex = re.compile(self.pattern)
        return sorted(t.name for t in answer.topics if not t.is_internal and regex.fullmatch(t.name))

    async def _member(self) -> None:
        """Join, sync and heartbeat until cancelled; rejoin when the group rebalances."""
        while True:
            try:
                await self._join_and_sync()
                while True:
                    await asyncio.sleep(HEARTBEAT_EVERY_S)
                    answer = await self._group_call(HEARTBEAT, build(
                        HEARTBEAT, group_id=self.group, generation_id=self.generation, member_id=self.member_id,
                        group_instance_id=None))
                    if answer.error_code != 0:
                        if answer.error_code in (ErrorCode.unknown_member_id.value,
                                                 ErrorCode.fenced_instance_id.value):
                            self.member_id = ""
                        break
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a failed round is retried, as a client would
                log.warning("REST consumer %s/%s: group round failed; retrying", self.group, self.name,
                            exc_info=True)
                await asyncio.sleep(1.0)
            self._joined.clear()

    async def _join_and_sync(self) -> None:
        topics = await self._subscribed_topics()
        protocol = build(JOIN_GROUP, "JoinGroupRequestProtocol", name=RANGE, metadata=encode_subscription(topics))
        while True:
            answer = await self._group_call(JOIN_GROUP, build(
                JOIN_GROUP, group_id=self.group, session_timeout=SESSION_TIMEOUT, rebalance_timeout=REBALANCE_TIMEOUT,
                member_id=self.member_id, group_instance_id=None, protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=(protocol,), reason=None))
            if answer.error_code == ErrorCode.member_id_required.value:
                self.member_id = answer.member_id
                continue
            if answer.error_code == ErrorCode.unknown_member_id.value:
                self.member_id = ""
                continue
            check(answer.error_code)
            break
        self.member_id, self.generation = answer.member_id, answer.generation_id
        assignments: tuple[Any, ...] = ()
        if answer.leader == answer.member_id:
            assignments = await self._lead(answer.members)
        synced = await self._group_call(SYNC_GROUP, build(
            SYNC_GROUP, group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=None, protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=answer.protocol_name,
            assignments=assignments))
        check(synced.error_code)
        mine = parse_assignment(synced.assignment) or {}
        assigned = sorted((t, p) for t, parts in mine.items() for p in parts)
        self.positions = {tp: offset for tp, offset in self.positions.items() if tp in set(assigned)}
        self.assigned = assigned
        self._joined.set()

    async def _lead(self, members: Any) -> tuple[Any, ...]:
        """The range assignment of every member, computed as the group leader does."""
        subscriptions = {m.member_id: parse_subscription(m.metadata) for m in members}
        wanted = sorted({t for s in subscriptions.values() if s for t in s.topics})
        counts = await self._partition_counts(wanted)
        specs = {mid: MemberSpec(None, frozenset(t for t in (s.topics if s else ()) if t in counts), {})
                 for mid, s in subscriptions.items()}
        plan = assign(RANGE, specs, counts)
        return tuple(build(SYNC_GROUP, "SyncGroupRequestAssignment", member_id=mid,
                           assignment=encode_assignment(plan.get(mid, {})))
                     for mid in subscriptions)

    async def _partition_counts(self, topics: list[str]) -> dict[str, int]:
        if not topics:
            return {}
        answer = await call(self.cluster, METADATA, build(
            METADATA, topics=tuple(build(METADATA, "MetadataRequestTopic", name=t, topic_id=NO_TOPIC_ID)
                                   for t in topics),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        return {t.name: len(t.partitions) for t in answer.topics if t.error_code == 0}

    # --- manual assignment and positions -----------------------------------------------------

    async def assign(self, partitions: list[Partition]) -> None:
        await self.unsubscribe()
        self.manual = list(partitions)
        self.assigned = list(partitions)

    async def wait_for_assignment(self, timeout_s: float) -> None:
        if self.manual is None and self._membership is not None:
            try:
                await asyncio.wait_for(self._joined.wait(), timeout_s)
            except asyncio.TimeoutError:
                pass

    def check_assigned(self, partitions: list[Partition]) -> None:
        """Seeking a partition not assigned is Kafka's IllegalStateException: 40903 in the REST proxy."""
        missing = [tp for tp in partitions if tp not in self.assigned]
        if missing:
            topic, index = missing[0]
            raise RestError(409, 40903, f"Illegal state: No current assignment for partition {topic}-{index}")

    async def seek_to(self, partitions: list[Partition], timestamp: int) -> None:
        self.check_assigned(partitions)
        self.positions.update(await self._list_offsets(partitions, timestamp))

    def seek(self, offsets: dict[Partition, int]) -> None:
        self.check_assigned(list(offsets))
        self.positions.update(offsets)

    async def _list_offsets(self, partitions: list[Partition], timestamp: int) -> dict[Partition, int]:
        """ListOffsets on this broker, and on their leaders for the partitions another broker leads."""
        def request(partitions: dict[str, set[int]]) -> Any:
            return list_offsets_request(partitions, timestamp)

        answer = await call(self.cluster, LIST_OFFSETS, request(_by_topic(partitions)), client_id=self.client_id)
        got = {(t.name, p.partition_index): p for t in answer.topics for p in t.partitions}
        elsewhere = {key for key, p in got.items() if p.error_code == ErrorCode.not_leader_or_follower}
        for found in await ask_leaders(self.cluster, LIST_OFFSETS, elsewhere, request):
            got.update({(t.name, p.partition_index): p for t in found.topics for p in t.partitions})
        for part in got.values():
            check(part.error_code)
        return {key: part.offset for key, part in got.items()}

    async def committed(self, partitions: list[Partition]) -> dict[Partition, tuple[int, str | None]]:
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        spec = build(OFFSET_FETCH, "OffsetFetchRequestGroup", group_id=self.group, member_id=None, member_epoch=-1,
                     topics=tuple(build(OFFSET_FETCH, "OffsetFetchRequestTopics", name=t, partition_indexes=tuple(p))
                                  for t, p in by_topic.items()))
        answer = await self._group_call(OFFSET_FETCH, build(OFFSET_FETCH, groups=(spec,), require_stable=False))
        (group,) = answer.groups
        check(group.error_code)
        return {(t.name, p.partition_index): (p.committed_offset, p.metadata)
                for t in group.topics for p in t.partitions if p.committed_offset >= 0}

    async def _initial_positions(self) -> None:
        """Positions of newly assigned partitions: the committed offset, else auto.offset.reset."""
        missing = [tp for tp in self.assigned if tp not in self.positions]
        if not missing:
            return
        committed = await self.committed(missing)
        for tp in missing:
            if tp in committed:
                self.positions[tp] = committed[tp][0]
        rest = [tp for tp in missing if tp not in self.positions]
        if rest:
            if self.config.auto_offset_reset == "none":
                raise kafka_error(ErrorCode.offset_out_of_range, "Undefined offset with no reset policy for "
                                                                 f"partitions: {rest}")
            reset = EARLIEST if self.config.auto_offset_reset == "earliest" else LATEST
            self.positions.update(await self._list_offsets(rest, reset))

    # --- records and commits ----------------------------------------------------------------

    async def poll(self, timeout_ms: int, max_bytes: int) -> list[tuple[str, int, Record]]:
        """Records from the current positions (waiting up to timeout_ms for some); positions move past them."""
        await self.wait_for_assignment(timeout_ms / 1000)
        if self.config.auto_commit and self.positions and self.manual is None:
            await self.commit(dict(self.positions))  # what the previous poll returned counts as consumed
        if not self.assigned:
            return []
        await self._initial_positions()
        ids = await self._topic_ids(sorted({t for t, _ in self.assigned}))
        fetched = await self._fetch([tp for tp in self.assigned if tp[0] in ids], ids, timeout_ms, max_bytes)
        out = []
        for key, part in fetched.items():
            if part.error_code == ErrorCode.offset_out_of_range.value and self.config.auto_offset_reset != "none":
                del self.positions[key]  # reset on the next poll, as the consumer's auto.offset.reset does
                continue
            check(part.error_code)
            position = self.positions.get(key, 0)
            for record in iter_records(part.records or b""):
                if record.offset >= position:
                    out.append((key[0], key[1], record))
                    self.positions[key] = record.offset + 1
        return out

    async def _fetch(self, partitions: list[Partition], ids: dict[str, uuid.UUID], timeout_ms: int,
                     max_bytes: int) -> dict[Partition, Any]:
        """Each partition's Fetch answer: from this broker, and from their leaders (without waiting
        again) for the partitions another broker leads, as a consumer fetches from each leader."""
        names = {v: k for k, v in ids.items()}
        answer = await call(self.cluster, FETCH, self._fetch_request(partitions, ids, timeout_ms, max_bytes),
                            client_id=self.client_id)
        got = {(names[t.topic_id], p.partition_index): p for t in answer.responses for p in t.partitions}
        elsewhere = {key for key, p in got.items() if p.error_code == ErrorCode.not_leader_or_follower}
        for found in await ask_leaders(self.cluster, FETCH, elsewhere,
                                       lambda led: self._fetch_request(_flat(led), ids, 0, max_bytes)):
            got.update({(names[t.topic_id], p.partition_index): p for t in found.responses for p in t.partitions})
        return got

    def _fetch_request(self, partitions: list[Partition], ids: dict[str, uuid.UUID], timeout_ms: int,
                       max_bytes: int) -> Any:
        topics: dict[str, list[Any]] = {}
        for topic, index in partitions:
            topics.setdefault(topic, []).append(build(
                FETCH, "FetchPartition", partition=index, current_leader_epoch=-1,
                fetch_offset=self.positions[topic, index], last_fetched_epoch=-1, log_start_offset=-1,
                partition_max_bytes=max_bytes, replica_directory_id=NO_TOPIC_ID))
        return build(FETCH, cluster_id=None, replica_state=build(FETCH, "ReplicaState", replica_id=-1, replica_epoch=-1),
                     max_wait=datetime.timedelta(milliseconds=timeout_ms), min_bytes=self.config.fetch_min_bytes,
                     max_bytes=max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                     topics=tuple(build(FETCH, "FetchTopic", topic_id=ids[t], partitions=tuple(p))
                                  for t, p in topics.items()),
                     forgotten_topics_data=(), rack_id="")

    async def _topic_ids(self, topics: list[str]) -> dict[str, uuid.UUID]:
        answer = await call(self.cluster, METADATA, build(
            METADATA, topics=tuple(build(METADATA, "MetadataRequestTopic", name=t, topic_id=NO_TOPIC_ID)
                                   for t in topics),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        return {t.name: t.topic_id for t in answer.topics if t.error_code == 0}

    async def commit(self, offsets: dict[Partition, int]) -> None:
        """OffsetCommit as this member (or as a simple consumer when assigned by hand)."""
        if not offsets:
            return
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), offset in offsets.items():
            by_topic.setdefault(topic, []).append(build(
                OFFSET_COMMIT, "OffsetCommitRequestPartition", partition_index=index, committed_offset=offset,
                committed_leader_epoch=-1, committed_metadata=""))
        joined = self.manual is None and self.member_id
        answer = await self._group_call(OFFSET_COMMIT, build(
            OFFSET_COMMIT, group_id=self.group, generation_id_or_member_epoch=self.generation if joined else -1,
            member_id=self.member_id if joined else "", group_instance_id=None,
            topics=tuple(build(OFFSET_COMMIT, "OffsetCommitRequestTopic", name=t, partitions=tuple(p))
                         for t, p in by_topic.items())))
        for topic in answer.topics:
            for part in topic.partitions:
                check(part.error_code)


def _flat(partitions: dict[str, set[int]]) -> list[Partition]:
    return sorted((topic, index) for topic, indexes in partitions.items() for index in indexes)


def _by_topic(partitions: list[Partition]) -> dict[str, set[int]]:
    by_topic: dict[str, set[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, set()).add(index)
    return by_topic


class ConsumerRegistry:
    """Every REST consumer instance of this broker, by (group, name), and the reaper of idle ones."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_s = timeout_ms / 1000
        self._instances: dict[tuple[str, str], ConsumerInstance] = {}
        self._reaper: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._instances)

    def add(self, instance: ConsumerInstance) -> None:
        key = (instance.group, instance.name)
        if key in self._instances:
            raise RestError(409, 40902, "Consumer with specified consumer ID already exists in the specified "
                                        "consumer group.")
        self._instances[key] = instance
        if self._reaper is None:
            self._reaper = asyncio.create_task(self._reap(), name="REST consumer reaper")

    def get(self, group: str, name: str) -> ConsumerInstance:
        """The live instance (its idle clock restarted), or 40403."""
        instance = self._instances.get((group, name))
        if instance is None or self._expired(instance) or instance.principal != current_principal():
            raise consumer_instance_not_found()
        instance.touch()
        return instance

    async def remove(self, group: str, name: str) -> None:
        instance = self._instances.get((group, name))
        if instance is None or instance.principal != current_principal():
            raise consumer_instance_not_found()
        del self._instances[(group, name)]
        await instance.unsubscribe()

    def _expired(self, instance: ConsumerInstance) -> bool:
        return time.monotonic() - instance.last_used > self.timeout_s

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(min(self.timeout_s / 2, 1.0))
            for key, instance in list(self._instances.items()):
                if self._expired(instance) and not instance.lock.locked():
                    log.info("REST consumer %s/%s idle for %.0f s: deleted", key[0], key[1], self.timeout_s)
                    self._instances.pop(key, None)
                    await instance.unsubscribe()

    async def close(self) -> None:
        """Stop every member task (the broker is stopping; sessions end with it)."""
        if self._reaper is not None:
            self._reaper.cancel()
        for instance in self._instances.values():
            instance.stop()
        self._instances.clear()
