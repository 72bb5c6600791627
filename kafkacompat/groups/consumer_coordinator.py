"""The KIP-848 consumer group coordinator (ConsumerGroupHeartbeat), after Kafka 4.1's GroupMetadataManager.

A member's heartbeat does everything: it joins (epoch 0), updates the
member's subscription, bumps the group epoch when membership, subscriptions
or the subscribed topics (created, deleted, grown) changed, recomputes the
target assignment with the server-side assignor, and moves the member one
reconciliation step towards its target. Leaving is a heartbeat with epoch
-1 (or -2 for a static member that will come back). Session and rebalance
timeouts fence members. Groups live in memory on the broker's event loop
beside the classic groups; committed offsets are shared with them. After
each change the group's state is handed to `save` (written to the store,
see durable.py), so the next coordinator continues the group.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Callable, Mapping

from kio.schema.errors import ErrorCode

from kafkacompat.storage import Store, TopicInfo

from ..config import BrokerConfig
from ..topic_names import TopicNameError, canonical_name, split_name
from .assignors import Assignment, MemberSpec, assign
from .classic_members import ClassicMembers
from .consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerMember,
    MemberState,
    is_subset,
    reconcile,
)
from .group import Group
from .heartbeat_coordinator import GroupSetting, HeartbeatError, HeartbeatGroupCoordinator
from .topic_regex import InvalidRegex, compile_regex, matches

log = logging.getLogger(__name__)

# a member's fields that are group state (not its timers)
_MEMBER_STATE = tuple(f.name for f in dataclasses.fields(ConsumerMember) if not f.name.endswith("_timer"))


@dataclasses.dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int  # -1: unchanged
    subscribed_topic_names: tuple[str, ...] | None  # None: unchanged
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Mapping[uuid.UUID, frozenset[int]] | None  # None: unchanged
    client_id: str
    client_host: str
    version: int


@dataclasses.dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class DescribedMember:
    member: ConsumerMember
    target: Assignment


@dataclasses.dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    group_id: str
    error: ErrorCode
    message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: tuple[DescribedMember, ...] = ()


class ConsumerGroupCoordinator(HeartbeatGroupCoordinator[ConsumerGroup, ConsumerMember]):
    KIND, HELD, UNREVOKED = "consumer group", "partitions", MemberState.UNREVOKED_PARTITIONS

    def __init__(
        self,
        config: BrokerConfig,
        store: Store,
        clock: Callable[[], int],
        classic_group: Callable[[str], Group | None],
        hand_over_classic_group: Callable[[str], None],
        take_back_classic_group: Callable[[Group], None],
        save: Callable[[str], None] = lambda group_id: None,
        group_setting: GroupSetting | None = None,
    ) -> None:
        super().__init__(config, clock, save, group_setting)
        self.store = store
        self._classic_group = classic_group  # the classic group of an id (or one known by offsets only)
        self._hand_over = hand_over_classic_group  # the classic coordinator lets go of a group
        self._take_back = take_back_classic_group  # ... and takes one back, which then rebalances
        self.classic = ClassicMembers(self)

    def _classic_state(self, group_id: str) -> str | None:
        group = self._classic_group(group_id)
        return group.state.value if group is not None else None

    @property
    def default_assignor(self) -> str:
        return self.config.group_consumer_assignors[0]

    def adopt(self, group: ConsumerGroup) -> None:
        """Serve a group loaded from the store: its members' session (and revocation) timeouts run from now."""
        self.groups[group.group_id] = group
        for member in group.members.values():
            self.schedule_session_timeout(group, member)
            self._track_revocation(group, ConsumerMember(member.member_id), member)

    # topics -------------------------------------------------------------------
    def topic_name(self, info: TopicInfo) -> str:
        return canonical_name(info.stream, info.name, self.store.default_stream)

    def lookup_topic(self, name: str) -> TopicInfo | None:
        try:
            stream, topic = split_name(name, self.store.default_stream)
        except TopicNameError:
            return None
        return self.store.get_topic(stream, topic)

    def subscription(self, group: ConsumerGroup) -> dict[uuid.UUID, tuple[str, int]]:
        """topic id -> (name, partitions) of every topic the group subscribes to, by name or regex.

        Every heartbeat asks, so that created, deleted and grown topics move
        the group epoch as Kafka's metadata updates do: each distinct name and
        regex of the group is resolved once, whatever the number of members.
        """
        metadata: dict[uuid.UUID, tuple[str, int]] = {}
        for topics in self._resolve(group).values():
            for info in topics:
                metadata[info.topic_id] = (self.topic_name(info), info.partitions)
        return metadata

    def _resolve(self, group: ConsumerGroup) -> dict[str, list[TopicInfo]]:
        """Each subscribed name, and each regex, with the topics it stands for."""
        resolved = {name: [info] for name in group.subscribed_names() if (info := self.lookup_topic(name)) is not None}
        patterns = group.regexes()
        if patterns:
            named = [(self.topic_name(t), t) for t in self.store.list_topics()]
            for pattern in patterns:
                resolved["regex:" + pattern] = [t for name, t in named if matches(pattern, name)]
        return resolved

    def _member_topics(self, group: ConsumerGroup) -> dict[str, frozenset[uuid.UUID]]:
        """Each member's subscribed topic ids, for the assignor."""
        resolved = self._resolve(group)
        out = {}
        shared: dict[tuple[tuple[str, ...], str | None], frozenset[uuid.UUID]] = {}  # one set per subscription
        for member in group.members.values():
            subscription = (member.subscribed_topic_names, member.subscribed_topic_regex)
            if subscription not in shared:
                keys = list(member.subscribed_topic_names)
                if member.subscribed_topic_regex:
                    keys.append("regex:" + member.subscribed_topic_regex)
                shared[subscription] = frozenset(info.topic_id for key in keys for info in resolved.get(key, ()))
            out[member.member_id] = shared[subscription]
        return out

    def subscribed_topic_names(self, group_id: str) -> set[str] | None:
        """Names of the topics a consumer group's members subscribe to (None: no such group)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        return {name for name, _ in self.subscription(group).values()}

    # ConsumerGroupHeartbeat ---------------------------------------------------
    def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        if req.version == 0 and req.member_epoch == 0 and not req.member_id:
            # v0 clients (kafka-clients 3.x) join without an id: as Kafka, the coordinator makes one
            req = dataclasses.replace(req, member_id=str(uuid.uuid4()))
        before = self._fingerprint(req.group_id, req.member_id)
        try:
            self._validate(req)
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(req)
            return self._heartbeat(req)
        except HeartbeatError as exc:
            if exc.code in (ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id):
                log.info("consumer group %s: member %s (epoch %d) refused: %s", req.group_id, req.member_id,
                         req.member_epoch, exc)
            return HeartbeatResult(exc.code, str(exc))
        finally:
            if self._fingerprint(req.group_id, req.member_id) != before:
                self._save(req.group_id)

    def _fingerprint(self, group_id: str, member_id: str) -> tuple | None:
        """What a heartbeat can change: the group's epochs and size, and the member's own fields.

        Most heartbeats change nothing; comparing this before and after one
        spares building and comparing the whole group's record every time.
        """
        group = self.groups.get(group_id)
        if group is None:
            return None
        member = group.members.get(member_id)
        fields = None if member is None else tuple(getattr(member, name) for name in _MEMBER_STATE)
        return id(group), group.group_epoch, group.assignment_epoch, len(group.members), fields

    def _validate(self, req: HeartbeatRequest) -> None:
        invalid = ErrorCode.invalid_request
        if (req.version >= 1 or req.member_epoch > 0 or req.member_epoch == LEAVE_EPOCH) and not req.member_id.strip():
            raise HeartbeatError(invalid, "MemberId can't be empty.")
        if not req.group_id.strip():
            raise HeartbeatError(invalid, "GroupId can't be empty.")
        if req.instance_id is not None and not req.instance_id.strip():
            raise HeartbeatError(invalid, "InstanceId can't be empty.")
        if req.rack_id is not None and not req.rack_id.strip():
            raise HeartbeatError(invalid, "RackId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise HeartbeatError(invalid, "RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or req.owned:
                raise HeartbeatError(invalid, "TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise HeartbeatError(
                    invalid, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
                )
        elif req.member_epoch == STATIC_LEAVE_EPOCH:
            if req.instance_id is None:
                raise HeartbeatError(invalid, "InstanceId can't be null.")
        elif req.member_epoch < STATIC_LEAVE_EPOCH:
            raise HeartbeatError(invalid, "MemberEpoch is invalid.")
        assignors = self.config.group_consumer_assignors
        if req.server_assignor is not None and req.server_assignor not in assignors:
            raise HeartbeatError(
                ErrorCode.unsupported_assignor,
                f"ServerAssignor {req.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(assignors)}.",
            )
        if req.subscribed_topic_regex:
            try:
                compile_regex(req.subscribed_topic_regex)
            except InvalidRegex as exc:
                raise HeartbeatError(
                    ErrorCode.invalid_regular_expression,
                    f"SubscribedTopicRegex `{req.subscribed_topic_regex}` is not a valid regular expression: {exc}.",
                ) from None

    def _group_for_heartbeat(self, group_id: str, member_id: str, create: bool) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        classic = self._classic_group(group_id)
        live = classic is not None and classic.state.value not in ("Empty", "Dead")
        if live:
            assert classic is not None
            if not create:
                raise HeartbeatError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
            upgraded = self.classic.upgrade(classic, self._clock())
            if isinstance(upgraded, str):
                log.info("%s", upgraded)
                raise HeartbeatError(ErrorCode.group_id_not_found, upgraded)
            self._hand_over(group_id)
            self.groups[group_id] = upgraded
            return upgraded
        if not create:
            # Kafka answers GROUP_ID_NOT_FOUND, which clients treat as fatal; a group whose stored state
            # was lost (or could not be read) must have its members rejoin at epoch 0 instead
            raise HeartbeatError(
                ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group_id}."
            )
        if classic is not None:
            log.info("empty classic group %s becomes a consumer group", group_id)
            self._hand_over(group_id)
        group = self.groups[group_id] = ConsumerGroup(group_id, self._clock())
        return group

    @staticmethod
    def _check_epoch(member: ConsumerMember, received: int, owned: Assignment | None) -> None:
        """Kafka's throwIfMemberEpochIsInvalid: a lost answer with the previous epoch is forgiven."""
        if received > member.member_epoch:
            raise HeartbeatError(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a greater member epoch ({received}) than the one known by "
                f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if received < member.member_epoch and (
            received != member.previous_member_epoch or not is_subset(owned, member.assigned)
        ):
            raise HeartbeatError(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a smaller member epoch ({received}) than the one known by "
                f"the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )

    def _member_for_heartbeat(self, group: ConsumerGroup, req: HeartbeatRequest) -> ConsumerMember:
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if req.member_epoch == 0:
                return member or ConsumerMember(req.member_id)
            if member is None:
                raise HeartbeatError(
                    ErrorCode.unknown_member_id, f"Member {req.member_id} is not a member of group {group.group_id}."
                )
            self._check_epoch(member, req.member_epoch, req.owned)
            return member
        current_id = group.static_members.get(req.instance_id)
        current = group.members.get(current_id) if current_id is not None else None
        if req.member_epoch == 0:
            if current is None:
                return ConsumerMember(req.member_id, instance_id=req.instance_id)
            if current.member_id == req.member_id:
                return current
            if current.member_epoch != STATIC_LEAVE_EPOCH:
                raise HeartbeatError(
                    ErrorCode.unreleased_instance_id,
                    f"Static member {req.member_id} with instance id {req.instance_id} cannot join the group "
                    f"because the instance id is owned by {current.member_id} member.",
                )
            log.info(
                "static member %s of group %s rejoins as %s (was %s)",
                req.instance_id, group.group_id, req.member_id, current.member_id,
            )
            return group.replace_static(current, req.member_id)
        if current is None:
            raise HeartbeatError(ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
        if current.member_id != req.member_id:
            raise HeartbeatError(
                ErrorCode.fenced_instance_id,
                f"Static member {req.member_id} with instance id {req.instance_id} is not the current "
                f"member of the group; the current member is {current.member_id}.",
            )
        self._check_epoch(current, req.member_epoch, req.owned)
        return current

    def _heartbeat(self, req: HeartbeatRequest) -> HeartbeatResult:
        group = self._group_for_heartbeat(req.group_id, req.member_id, create=req.member_epoch == 0)
        if req.member_id not in group.members and len(group.members) >= self.config.group_consumer_max_size:
            raise HeartbeatError(
                ErrorCode.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of {self.config.group_consumer_max_size} members.",
            )
        member = self._member_for_heartbeat(group, req)
        is_new = member.member_id not in group.members
        updated = dataclasses.replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
            subscribed_topic_names=(
                tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (req.subscribed_topic_regex or None) if req.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            client_id=req.client_id,
            client_host=req.client_host,
            classic=None,  # a member that heartbeats speaks the consumer protocol from now on
        )
        if is_new:
            log.info("member %s joins consumer group %s", updated.member_id, group.group_id)
        updated = self.update_member(group, member, updated, req.owned, is_new)
        self.schedule_session_timeout(group, updated)
        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.owned is not None
        )
        changed = dict(updated.assigned) != dict(member.assigned)
        return HeartbeatResult(
            member_id=updated.member_id,
            member_epoch=updated.member_epoch,
            heartbeat_interval_ms=self._group_setting(group.group_id, "consumer.heartbeat.interval.ms"),
            assignment=updated.assigned if (full or changed) else None,
        )

    def update_member(
        self, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
        owned: Assignment | None, is_new: bool,
    ) -> ConsumerMember:
        """Store a member's new subscription, move the group epoch and reconcile the member one step.

        The group epoch moves when the group is new, the member is new, its
        subscription changed, or the subscribed topics changed since last seen.
        """
        bump = group.group_epoch == 0 or is_new or (
            updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_topic_regex != member.subscribed_topic_regex
        )
        group.put(updated)
        metadata = self.subscription(group)
        if metadata != group.subscribed:
            bump = True
            group.subscribed = metadata
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, metadata)
        target = group.target.get(updated.member_id, {})
        if not updated.is_reconciled_to(group.assignment_epoch):
            reconciled = reconcile(group, updated, group.assignment_epoch, target, owned)
            if reconciled is not updated:
                group.put(reconciled)
                self._track_revocation(group, updated, reconciled)
                updated = reconciled
        return updated

    def _assign(self, group: ConsumerGroup, metadata: Mapping[uuid.UUID, tuple[str, int]]) -> None:
        assignor = group.preferred_assignor(self.default_assignor)
        member_topics = self._member_topics(group)
        specs = {
            member_id: MemberSpec(member.instance_id, member_topics[member_id], group.target.get(member_id, {}))
            for member_id, member in group.members.items()
        }
        group.target = assign(assignor, specs, {topic: count for topic, (_, count) in metadata.items()})
        group.assignment_epoch = group.group_epoch
        log.info(
            "consumer group %s: target assignment for epoch %d with assignor %s over %d member(s)",
            group.group_id, group.group_epoch, assignor, len(group.members),
        )

    def _track_revocation(self, group: ConsumerGroup, before: ConsumerMember, after: ConsumerMember) -> None:
        """A member asked to revoke gets its rebalance timeout to do so, else it is fenced."""
        if after.state is MemberState.UNREVOKED_PARTITIONS:
            if before.state is not MemberState.UNREVOKED_PARTITIONS or before.member_epoch != after.member_epoch:
                if after.rebalance_timer is not None:
                    after.rebalance_timer.cancel()
                self._start_rebalance_timer(group, after)
        elif after.rebalance_timer is not None:
            after.rebalance_timer.cancel()
            after.rebalance_timer = None

    # timeouts -----------------------------------------------------------------
    def _session_timeout_ms(self, group: ConsumerGroup, member: ConsumerMember) -> int:
        """Classic members keep the session timeout they joined with; others get the group's (else the broker's)."""
        if member.classic:
            return member.classic.session_timeout_ms
        return self._group_setting(group.group_id, "consumer.session.timeout.ms")

    def fence(self, group: ConsumerGroup, member_id: str) -> None:
        """Remove a member; the others get its partitions at the next group epoch.

        When the member was the last to speak the consumer protocol, the
        classic members left make it a classic group again (online downgrade).
        """
        leaving = group.members.get(member_id)
        if leaving is not None and leaving.classic is None and len(group.members) > 1:
            # as Kafka, the downgrade happens instead of the epoch bump: generation = group epoch
            rest = [m for m in group.members.values() if m.member_id != member_id]
            classic = self.classic.downgrade(group, rest, self._clock())
            if classic is not None:
                for member in group.members.values():
                    member.cancel_timers()
                del self.groups[group.group_id]
                self._take_back(classic)
                return
        group.remove(member_id)
        group.group_epoch += 1
        group.subscribed = self.subscription(group)
        if group.is_empty():
            group.state_timestamp_ms = self._clock()

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None:
            raise HeartbeatError(ErrorCode.group_id_not_found, f"Group {req.group_id} not found.")
        answer = HeartbeatResult(member_id=req.member_id, member_epoch=req.member_epoch)
        if req.instance_id is None:
            if req.member_id not in group.members:
                raise HeartbeatError(
                    ErrorCode.unknown_member_id, f"Member {req.member_id} is not a member of group {group.group_id}."
                )
            log.info("member %s left consumer group %s", req.member_id, group.group_id)
            self.fence(group, req.member_id)
            return answer
        current_id = group.static_members.get(req.instance_id)
        if current_id is None or current_id not in group.members:
            raise HeartbeatError(ErrorCode.unknown_member_id, f"Instance id {req.instance_id} is unknown.")
        if current_id != req.member_id:
            raise HeartbeatError(
                ErrorCode.fenced_instance_id,
                f"Static member {req.member_id} with instance id {req.instance_id} is not the current "
                f"member of the group; the current member is {current_id}.",
            )
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            log.info(
                "static member %s (instance %s) temporarily left consumer group %s",
                req.member_id, req.instance_id, group.group_id,
            )
            member = group.members[current_id]
            group.put(dataclasses.replace(member, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation={}))
            return answer
        log.info("static member %s (instance %s) left consumer group %s", req.member_id, req.instance_id, group.group_id)
        self.fence(group, current_id)
        return answer

    # offsets ------------------------------------------------------------------
    def validate_commit(
        self, group: ConsumerGroup, member_id: str, epoch: int, version: int, transactional: bool = False,
    ) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetCommit (TxnOffsetCommit's versions are not OffsetCommit's)."""
        if epoch < 0 and not member_id and group.is_empty():
            return ErrorCode.none  # admin tools and consumers without group management
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member.classic is not None:  # a classic member commits with its generation, any version
            return ErrorCode.none if epoch == member.member_epoch else ErrorCode.illegal_generation
        if version < 9 and not transactional:
            return ErrorCode.unsupported_version  # consumer-protocol members commit with OffsetCommit v9+
        if epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

    # admin --------------------------------------------------------------------
    def describe(self, group_id: str) -> DescribedConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            classic = self._classic_state(group_id)
            message = f"Group {group_id} is not a consumer group." if classic not in (None, "Dead") else f"Group {group_id} not found."
            return DescribedConsumerGroup(group_id, ErrorCode.group_id_not_found, message)
        return DescribedConsumerGroup(
            group_id, ErrorCode.none, None, group.state.value, group.group_epoch, group.assignment_epoch,
            group.preferred_assignor(self.default_assignor),
            tuple(DescribedMember(m, group.target.get(m.member_id, {})) for m in group.members.values()),
        )

    def topic_names(self, assignment: Assignment) -> dict[uuid.UUID, str]:
        out = {}
        for topic_id in assignment:
            info = self.store.get_topic_by_id(topic_id)
            out[topic_id] = self.topic_name(info) if info is not None else ""
        return out

    def drop_if_empty(self, group_id: str) -> bool:
        """Forget an empty consumer group (a classic JoinGroup takes its id over)."""
        group = self.groups.get(group_id)
        if group is None or not group.is_empty():
            return False
        del self.groups[group_id]
        log.info("empty consumer group %s becomes a classic group", group_id)
        return True


__all__ = [
    "ConsumerGroupCoordinator", "ConsumerGroupState", "DescribedConsumerGroup", "HeartbeatRequest", "HeartbeatResult",
]
