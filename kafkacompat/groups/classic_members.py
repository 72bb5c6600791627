"""Classic-protocol members inside KIP-848 consumer groups: Kafka's online upgrade and downgrade.

During a rolling upgrade a group has members of both kinds. As Kafka 4.1
does, the first consumer-protocol member converts a live classic group (of
protocol type "consumer") into a consumer group; the classic members stay,
and their JoinGroup, SyncGroup, Heartbeat and LeaveGroup are answered from
the consumer group: JoinGroup reconciles the member towards its target
assignment at once (its subscription says what it still owns), SyncGroup
hands back the member's assignment in ConsumerProtocolAssignment bytes, and
Heartbeat answers REBALANCE_IN_PROGRESS until the member has caught up with
the group epoch, so the client rejoins. Classic clients joining a live
consumer group are served the same way. On the way back, when the last
consumer-protocol member leaves and only classic members are left, the
group becomes a classic group again and rebalances (Kafka's online
downgrade). group.consumer.migration.policy says which ways are open.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode

from kafkacompat.storage import TopicInfo

from ..config import BrokerConfig
from .assignors import Assignment
from .classic_api import JoinRequest, JoinResult, SyncResult
from .consumer_group import ClassicMembership, ConsumerGroup, ConsumerMember, MemberState
from .consumer_protocol import CONSUMER_PROTOCOL_TYPE, encode_assignment, parse_assignment, parse_subscription
from .group import Group, GroupState, Member

log = logging.getLogger(__name__)


class ConsumerGroupHost(Protocol):
    """What classic members need of the consumer group coordinator that hosts them (it owns the
    groups, their topics and their members' timers); declared here so that neither module imports the other."""

    config: BrokerConfig

    def lookup_topic(self, name: str) -> TopicInfo | None: ...

    def topic_names(self, assignment: Assignment) -> dict[uuid.UUID, str]: ...

    def subscription(self, group: ConsumerGroup) -> dict[uuid.UUID, tuple[str, int]]: ...

    def update_member(
        self, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember,
        owned: Assignment | None, is_new: bool,
    ) -> ConsumerMember: ...

    def schedule_session_timeout(self, group: ConsumerGroup, member: ConsumerMember) -> None: ...

    def fence(self, group: ConsumerGroup, member_id: str) -> None: ...


class ClassicMembers:
    def __init__(self, coordinator: ConsumerGroupHost) -> None:
        self.coordinator = coordinator

    # topic names <-> ids ---------------------------------------------------------
    def _by_id(self, by_name: dict[str, frozenset[int]]) -> dict[uuid.UUID, frozenset[int]]:
        out = {}
        for name, parts in by_name.items():
            info = self.coordinator.lookup_topic(name)
            if info is not None:
                out[info.topic_id] = frozenset(p for p in parts if p < info.partitions)
        return {t: p for t, p in out.items() if p}

    def _by_name(self, by_id: dict[uuid.UUID, frozenset[int]]) -> dict[str, frozenset[int]]:
        names = self.coordinator.topic_names(by_id)
        return {names[t]: parts for t, parts in by_id.items() if names[t]}

    # upgrade -----------------------------------------------------------------------
    def upgrade(self, classic: Group, now_ms: int) -> ConsumerGroup | str:
        """The consumer group a live classic group becomes, or Kafka's reason to refuse."""
        refusal = f"Cannot upgrade classic group {classic.group_id} to consumer group because"
        if self.coordinator.config.group_consumer_migration_policy not in ("bidirectional", "upgrade"):
            return f"{refusal} the online upgrade is disabled."
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE or classic.protocol_name is None:
            return f"{refusal} the group does not use the consumer embedded protocol."
        if len(classic.members) > self.coordinator.config.group_consumer_max_size:
            return f"{refusal} the group size exceeds the consumer group maximum size."
        group = ConsumerGroup(classic.group_id, now_ms)
        group.group_epoch = group.assignment_epoch = classic.generation
        for old in classic.members.values():
            chosen = dict(old.protocols).get(classic.protocol_name)
            subscription = parse_subscription(chosen) if chosen is not None else None
            assignment = parse_assignment(old.assignment)
            if subscription is None or assignment is None:
                return (
                    f"Cannot upgrade the classic group {classic.group_id} to consumer group because "
                    "the embedded consumer protocol is malformed."
                )
            assigned = self._by_id(assignment)
            member = ConsumerMember(
                old.member_id, instance_id=old.instance_id, rack_id=subscription.rack_id,
                client_id=old.client_id, client_host=old.client_host,
                rebalance_timeout_ms=old.rebalance_timeout_ms, subscribed_topic_names=subscription.topics,
                member_epoch=classic.generation, previous_member_epoch=classic.generation,
                assigned=assigned, classic=ClassicMembership(old.session_timeout_ms, tuple(old.protocols)),
            )
            group.put(member)
            group.target[member.member_id] = assigned
        group.subscribed = self.coordinator.subscription(group)
        for member in group.members.values():
            self.coordinator.schedule_session_timeout(group, member)
        log.info(
            "classic group %s (generation %d, %d members) becomes a consumer group",
            classic.group_id, classic.generation, len(classic.members),
        )
        return group

    # downgrade ---------------------------------------------------------------------
    def downgrade(self, group: ConsumerGroup, members: list[ConsumerMember], now_ms: int) -> Group | None:
        """The classic group `members` (the group without its last consumer-protocol member) become.

        Kafka's ClassicGroup.fromConsumerGroup; None when the policy or the
        classic group size forbids it, or when a member speaks the consumer protocol.
        """
        config = self.coordinator.config
        if config.group_consumer_migration_policy not in ("bidirectional", "downgrade"):
            return None
        if not members or any(m.classic is None for m in members) or len(members) > config.group_max_size:
            return None
        classic = Group(group.group_id, now_ms)
        for member in members:
            assert member.classic is not None
            classic.add(Member(
                member_id=member.member_id, instance_id=member.instance_id, client_id=member.client_id,
                client_host=member.client_host, session_timeout_ms=member.classic.session_timeout_ms,
                rebalance_timeout_ms=member.rebalance_timeout_ms, protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=list(member.classic.protocols),
                assignment=encode_assignment(self._by_name(dict(member.assigned))),
            ))
        classic.generation = group.group_epoch
        classic.protocol_name = classic.select_protocol()
        classic.state = GroupState.STABLE
        log.info("consumer group %s of %d classic member(s) becomes a classic group", group.group_id, len(members))
        return classic

    # JoinGroup -----------------------------------------------------------------------
    def join(self, group: ConsumerGroup, req: JoinRequest) -> JoinResult:
        """Kafka's classicGroupJoinToConsumerGroup: answered at once with the member's next step."""
        member_id = req.member_id or str(uuid.uuid4())
        limit = self.coordinator.config.group_consumer_max_size
        if member_id not in group.members and len(group.members) >= limit:
            return JoinResult(ErrorCode.group_max_size_reached, "")
        if req.protocol_type != CONSUMER_PROTOCOL_TYPE or not req.protocols:
            return JoinResult(ErrorCode.inconsistent_group_protocol, "")
        subscription = parse_subscription(req.protocols[0][1])
        if subscription is None:
            return JoinResult(ErrorCode.inconsistent_group_protocol, "")
        if not req.member_id and req.instance_id is None and req.require_known_member_id:
            return JoinResult(ErrorCode.member_id_required, member_id)
        member = self._member_for_join(group, member_id, req)
        if isinstance(member, ErrorCode):
            return JoinResult(member, req.member_id)
        is_new = member.member_id not in group.members
        updated = dataclasses.replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            server_assignor=None,
            subscribed_topic_names=subscription.topics,
            client_id=req.client_id,
            client_host=req.client_host,
            classic=ClassicMembership(req.session_timeout_ms, tuple(req.protocols)),
        )
        if is_new:
            log.info("classic member %s joins consumer group %s", updated.member_id, group.group_id)
        updated = self.coordinator.update_member(group, member, updated, self._by_id(subscription.owned), is_new)
        self.coordinator.schedule_session_timeout(group, updated)
        return JoinResult(
            ErrorCode.none, updated.member_id, updated.member_epoch, CONSUMER_PROTOCOL_TYPE, req.protocols[0][0],
        )

    def _member_for_join(self, group: ConsumerGroup, member_id: str, req: JoinRequest) -> ConsumerMember | ErrorCode:
        if req.instance_id is None:
            # as Kafka: a dynamic member is created under the id it names (the one MEMBER_ID_REQUIRED
            # handed it, or its id from before the group changed kind), never refused as unknown
            return group.members.get(member_id) or ConsumerMember(member_id)
        current_id = group.static_members.get(req.instance_id)
        current = group.members.get(current_id) if current_id is not None else None
        if current is None:
            return ConsumerMember(member_id, instance_id=req.instance_id)
        if current.member_id == req.member_id:
            return current
        if req.member_id:
            return ErrorCode.fenced_instance_id
        log.info(
            "static member %s of consumer group %s rejoins through the classic protocol as %s",
            req.instance_id, group.group_id, member_id,
        )
        return group.replace_static(current, member_id)

    # SyncGroup / Heartbeat / LeaveGroup ------------------------------------------------
    def _member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation: int
    ) -> ConsumerMember | ErrorCode:
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if instance_id is not None and member.instance_id != instance_id:
            return ErrorCode.fenced_instance_id
        if member.classic is None:
            return ErrorCode.unknown_member_id  # a consumer-protocol member has no classic session
        if generation != member.member_epoch:
            return ErrorCode.illegal_generation
        return member

    def sync(
        self, group: ConsumerGroup, generation: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None,
    ) -> SyncResult:
        member = self._member(group, member_id, instance_id, generation)
        if isinstance(member, ErrorCode):
            return SyncResult(member)
        assert member.classic is not None
        chosen = member.classic.protocols[0][0]
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name != chosen
        ):
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        self.coordinator.schedule_session_timeout(group, member)
        return SyncResult(
            ErrorCode.none, CONSUMER_PROTOCOL_TYPE, chosen, encode_assignment(self._by_name(dict(member.assigned))),
        )

    def heartbeat(self, group: ConsumerGroup, generation: int, member_id: str, instance_id: str | None) -> ErrorCode:
        member = self._member(group, member_id, instance_id, generation)
        if isinstance(member, ErrorCode):
            return member
        self.coordinator.schedule_session_timeout(group, member)
        if member.state is not MemberState.STABLE or member.member_epoch != group.group_epoch:
            return ErrorCode.rebalance_in_progress  # the member rejoins to take its next step
        return ErrorCode.none

    def leave(self, group: ConsumerGroup, leaving: Sequence[tuple[str, str | None]]) -> list[ErrorCode]:
        errors = []
        for member_id, instance_id in leaving:
            if not member_id and instance_id is not None:
                member_id = group.static_members.get(instance_id, "")
            member = group.members.get(member_id)
            if member is None:
                errors.append(ErrorCode.unknown_member_id)
            elif instance_id is not None and member.instance_id != instance_id:
                errors.append(ErrorCode.fenced_instance_id)
            else:
                log.info("member %s leaves consumer group %s through LeaveGroup", member_id, group.group_id)
                self.coordinator.fence(group, member_id)
                errors.append(ErrorCode.none)
        return errors

