"""The KIP-1071 Streams group coordinator (StreamsGroupHeartbeat), after Kafka 4.1's GroupMetadataManager.

Kafka Streams with group.protocol=streams joins with its topology; each
heartbeat then updates the member, moves the group epoch when members come
or go or the topology's task counts change (topics created or grown),
recomputes the target task assignment and moves the member one
reconciliation step (see streams_group.py). Leaving is epoch -1 (-2: a
static member that will come back); the session and rebalance timeouts
fence members. Internal topics are created by the heartbeat handler before
it calls in here (creating is I/O, this is bookkeeping on the event loop).
Groups live in memory beside the classic and consumer groups and share
their committed offsets; every change of a group's epochs, topology,
members or tasks is written to the store as consumer groups are (see
durable.py), so after a restart (or on the next coordinator) members go on
with their epoch and tasks. A group's own configs (kafka-configs
--entity-type groups: streams.num.standby.replicas,
streams.session.timeout.ms, streams.heartbeat.interval.ms) override the
broker's; a changed standby count takes effect at once with a new group
epoch.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from ..config import BrokerConfig
from .consumer_group import LEAVE_EPOCH, STATIC_LEAVE_EPOCH
from .heartbeat_coordinator import GroupSetting, HeartbeatError, HeartbeatGroupCoordinator
from .streams_group import NO_TASKS, MemberState, StreamsGroup, StreamsMember, Tasks, assign_tasks, reconcile
from .streams_topology import ConfiguredTopology, Topology, configure

log = logging.getLogger(__name__)

_MEMBER_STATE = tuple(f.name for f in dataclasses.fields(StreamsMember) if not f.name.endswith("_timer"))

STREAMS_PROTOCOL_TYPE = "streams"
# StreamsGroupHeartbeatResponse.Status codes
STALE_TOPOLOGY, MISSING_SOURCE_TOPICS, MISSING_INTERNAL_TOPICS = 0, 1, 3


@dataclasses.dataclass(frozen=True, slots=True)
class StreamsHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int  # -1: unchanged
    topology: Topology | None
    owned: Tasks | None  # None: unchanged
    process_id: str | None
    user_endpoint: tuple[str, int] | None
    client_tags: tuple[tuple[str, str], ...] | None
    client_id: str
    client_host: str


@dataclasses.dataclass(frozen=True, slots=True)
class StreamsHeartbeatResult:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    statuses: tuple[tuple[int, str], ...] = ()
    tasks: Tasks | None = None  # None: unchanged since the last answer


class StreamsGroupCoordinator(HeartbeatGroupCoordinator[StreamsGroup, StreamsMember]):
    KIND, HELD, UNREVOKED = "streams group", "tasks", MemberState.UNREVOKED_TASKS

    def __init__(self, config: BrokerConfig, clock: Callable[[], int],
                 partitions_of: Callable[[str], int | None], is_other_group: Callable[[str], bool],
                 save: Callable[[str], None] = lambda group_id: None,
                 group_setting: GroupSetting | None = None) -> None:
        super().__init__(config, clock, save, group_setting)
        self._partitions_of = partitions_of  # a topic's partition count, None when it does not exist
        self._is_other_group = is_other_group  # the id names a live classic or consumer group

    def adopt(self, group: StreamsGroup) -> None:
        """Serve a group loaded from the store: its members' session (and revocation) timeouts run from now."""
        self.groups[group.group_id] = group
        for member in group.members.values():
            self.schedule_session_timeout(group, member)
            self._track_revocation(group, StreamsMember(member.member_id), member)

    # per-group configs ----------------------------------------------------------
    def standby_replicas(self, group_id: str) -> int:
        return self._group_setting(group_id, "streams.num.standby.replicas")

    def _session_timeout_ms(self, group: StreamsGroup, member: StreamsMember) -> int:
        return self._group_setting(group.group_id, "streams.session.timeout.ms")

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._group_setting(group_id, "streams.heartbeat.interval.ms")

    def topology_of(self, group_id: str) -> Topology | None:
        group = self.groups.get(group_id)
        return group.topology if group is not None else None

    def configured(self, topology: Topology) -> ConfiguredTopology:
        return configure(topology, self._partitions_of)

    # StreamsGroupHeartbeat ----------------------------------------------------
    def heartbeat(self, req: StreamsHeartbeat) -> StreamsHeartbeatResult:
        before = self._fingerprint(req.group_id, req.member_id)
        try:
            self._validate(req)
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(req)
            return self._heartbeat(req)
        except HeartbeatError as exc:
            log.info("streams group %s: member %s (epoch %d) refused: %s", req.group_id, req.member_id,
                     req.member_epoch, exc)
            return StreamsHeartbeatResult(exc.code, str(exc))
        finally:
            if self._fingerprint(req.group_id, req.member_id) != before:
                self._save(req.group_id)

    def _fingerprint(self, group_id: str, member_id: str) -> tuple | None:
        """What a heartbeat can change (most change nothing): spares building the group's record each time."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        member = group.members.get(member_id)
        fields = None if member is None else tuple(getattr(member, name) for name in _MEMBER_STATE)
        return id(group), group.group_epoch, group.assignment_epoch, len(group.members), group.topology, fields

    @staticmethod
    def _validate(req: StreamsHeartbeat) -> None:
        invalid = ErrorCode.invalid_request
        if not req.group_id.strip():
            raise HeartbeatError(invalid, "GroupId can't be empty.")
        if not req.member_id.strip():
            raise HeartbeatError(invalid, "MemberId can't be empty.")
        if req.instance_id is not None and not req.instance_id.strip():
            raise HeartbeatError(invalid, "InstanceId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise HeartbeatError(invalid, "RebalanceTimeoutMs must be provided in first request.")
            if req.topology is None:
                raise HeartbeatError(invalid, "Topology must be non-null when joining.")
            if req.process_id is None or not req.process_id.strip():
                raise HeartbeatError(invalid, "ProcessId can't be empty.")
            if req.owned:
                raise HeartbeatError(invalid, "ActiveTasks, StandbyTasks and WarmupTasks must be empty when joining.")
        elif req.member_epoch < STATIC_LEAVE_EPOCH:
            raise HeartbeatError(invalid, f"MemberEpoch is {req.member_epoch}, but must be greater than or equal to -2.")

    def _group(self, req: StreamsHeartbeat) -> StreamsGroup:
        group = self.groups.get(req.group_id)
        if group is not None:
            return group
        if req.member_epoch != 0:
            raise HeartbeatError(ErrorCode.unknown_member_id,
                                 f"Member {req.member_id} is not a member of group {req.group_id}.")
        if self._is_other_group(req.group_id):
            raise HeartbeatError(ErrorCode.group_id_not_found, f"Group {req.group_id} is not a streams group.")
        group = self.groups[req.group_id] = StreamsGroup(req.group_id, self._clock())
        return group

    @staticmethod
    def _check_epoch(member: StreamsMember, received: int) -> None:
        """Kafka's throwIfMemberEpochIsInvalid: a lost answer with the previous epoch is forgiven."""
        if received == member.member_epoch or (received == member.previous_member_epoch and received >= 0):
            return
        bigger = "greater" if received > member.member_epoch else "smaller"
        raise HeartbeatError(
            ErrorCode.fenced_member_epoch,
            f"The streams group member has a {bigger} member epoch ({received}) than the one known by the group "
            f"coordinator ({member.member_epoch}). The member must abandon all its tasks and rejoin.",
        )

    def _member(self, group: StreamsGroup, req: StreamsHeartbeat) -> StreamsMember:
        member = group.members.get(req.member_id)
        if member is None:
            if req.member_epoch != 0:
                raise HeartbeatError(ErrorCode.unknown_member_id,
                                     f"Member {req.member_id} is not a member of group {group.group_id}.")
            return StreamsMember(req.member_id)
        if req.member_epoch == 0:  # rejoins: it lost its tasks
            group.remove(member.member_id)
            group.group_epoch += 1
            return StreamsMember(req.member_id)
        self._check_epoch(member, req.member_epoch)
        return member

    def _heartbeat(self, req: StreamsHeartbeat) -> StreamsHeartbeatResult:
        group = self._group(req)
        member = self._member(group, req)
        is_new = member.member_id not in group.members
        statuses = self._topology(group, req)
        updated = dataclasses.replace(
            member,
            process_id=req.process_id if req.process_id is not None else member.process_id,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            topology_epoch=req.topology.epoch if req.topology is not None else member.topology_epoch,
            user_endpoint=req.user_endpoint if req.user_endpoint is not None else member.user_endpoint,
            client_tags=req.client_tags if req.client_tags is not None else member.client_tags,
            reported=req.owned if req.owned is not None else member.reported,
            client_id=req.client_id, client_host=req.client_host,
        )
        if is_new:
            log.info("member %s (process %s) joins streams group %s", updated.member_id, updated.process_id,
                     group.group_id)
            group.group_epoch += 1
        updated = self._update(group, updated)
        statuses += self._statuses(group, updated)
        self.schedule_session_timeout(group, updated)
        full = req.member_epoch == 0 or req.owned is not None and updated.assigned != updated.reported
        changed = updated.assigned != member.assigned or updated.member_epoch != member.member_epoch
        return StreamsHeartbeatResult(
            member_id=updated.member_id, member_epoch=updated.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
            statuses=statuses, tasks=updated.assigned if (full or changed) else None,
        )

    def _topology(self, group: StreamsGroup, req: StreamsHeartbeat) -> tuple[tuple[int, str], ...]:
        """Take the member's topology when the group has none (or only this member had one)."""
        if req.topology is None:
            return ()
        if group.topology is None or group.is_empty() or req.topology.epoch > group.topology.epoch and (
                set(group.members) <= {req.member_id}):
            if group.topology != req.topology:
                group.topology = req.topology
                group.group_epoch += 1
            return ()
        if req.topology.epoch != group.topology.epoch:
            return ((STALE_TOPOLOGY, f"The member's topology epoch {req.topology.epoch} is not the group's "
                                     f"topology epoch {group.topology.epoch}."),)
        return ()

    def _statuses(self, group: StreamsGroup, member: StreamsMember) -> tuple[tuple[int, str], ...]:
        if group.topology is None:
            return ()
        configured = self.configured(group.topology)
        if configured.missing_sources:
            return ((MISSING_SOURCE_TOPICS, "Source topics " + ", ".join(configured.missing_sources) + " are missing."),)
        if configured.to_create:
            return ((MISSING_INTERNAL_TOPICS, "Internal topics are missing: " + ", ".join(sorted(configured.to_create))),)
        return ()

    def _update(self, group: StreamsGroup, updated: StreamsMember) -> StreamsMember:
        group.put(updated)
        configured = self.configured(group.topology) if group.topology is not None else None
        tasks = dict(configured.tasks) if configured is not None and configured.ready else {}
        if tasks != group.tasks or self.standby_replicas(group.group_id) != group.standbys:
            group.tasks = tasks
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._assign(group)
        target = group.target.get(updated.member_id, NO_TASKS)
        if not updated.is_reconciled_to(group.assignment_epoch):
            reconciled = reconcile(group, updated, group.assignment_epoch, target, updated.reported)
            if reconciled is not updated:
                group.put(reconciled)
                self._track_revocation(group, updated, reconciled)
                updated = reconciled
        return updated

    def _assign(self, group: StreamsGroup) -> None:
        previous = {m: member.assigned | group.target.get(m, NO_TASKS) for m, member in group.members.items()}
        group.standbys = self.standby_replicas(group.group_id)
        group.target = assign_tasks(group.members, group.tasks, previous, group.standbys)
        group.assignment_epoch = group.group_epoch
        log.info("streams group %s: target assignment for epoch %d over %d member(s), %d task(s), %d standby "
                 "replica(s)", group.group_id, group.group_epoch, len(group.members), sum(group.tasks.values()),
                 group.standbys)

    def _track_revocation(self, group: StreamsGroup, before: StreamsMember, after: StreamsMember) -> None:
        """A member asked to revoke gets its rebalance timeout to do so, else it is fenced."""
        if after.state is MemberState.UNREVOKED_TASKS:
            if before.state is not MemberState.UNREVOKED_TASKS:
                self._start_rebalance_timer(group, after)
        elif after.rebalance_timer is not None:
            after.rebalance_timer.cancel()
            after.rebalance_timer = None

    # timeouts -----------------------------------------------------------------
    def fence(self, group: StreamsGroup, member_id: str) -> None:
        """Remove a member; the others get its tasks at the next group epoch."""
        if group.remove(member_id) is None:
            return
        group.group_epoch += 1
        if group.is_empty():
            group.state_timestamp_ms = self._clock()

    def _leave(self, req: StreamsHeartbeat) -> StreamsHeartbeatResult:
        group = self.groups.get(req.group_id)
        if group is None or req.member_id not in group.members:
            raise HeartbeatError(ErrorCode.unknown_member_id,
                                 f"Member {req.member_id} is not a member of group {req.group_id}.")
        log.info("member %s left streams group %s", req.member_id, req.group_id)
        self.fence(group, req.member_id)
        return StreamsHeartbeatResult(member_id=req.member_id, member_epoch=req.member_epoch)

    # offsets ------------------------------------------------------------------
    def validate_commit(self, group: StreamsGroup, member_id: str, epoch: int, version: int,
                        transactional: bool = False) -> ErrorCode:
        """Kafka's StreamsGroup.validateOffsetCommit."""
        if epoch < 0 and not member_id and group.is_empty():
            return ErrorCode.none  # admin tools (kafka-streams-application-reset, kafka-consumer-groups)
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if version < 9 and not transactional:
            return ErrorCode.unsupported_version
        if epoch != member.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none

