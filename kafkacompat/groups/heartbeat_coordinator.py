"""What the coordinators of KIP-848-style groups share: groups in memory, member timers, fencing, admin.

The consumer group coordinator (KIP-848) and the Streams group coordinator
(KIP-1071) both drive their groups by the members' heartbeats: a member
that stops heartbeating for its session timeout, or that does not give up
what it was asked to revoke within its rebalance timeout, is fenced. The
timers, their expiry, the OffsetFetch member check, listing, deletion and
dropping a group another broker now coordinates are written once here; each
coordinator says how it fences a member and how its log lines name things.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Mapping
from typing import ClassVar, Generic, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from ..catalog.group_configs import broker_default
from ..config import BrokerConfig
from .heartbeat_group import HeartbeatMember

log = logging.getLogger(__name__)


GroupSetting = Callable[[str, str], int]  # (group id, int group config name) -> the group's own value, else the broker's


class HeartbeatError(Exception):
    """A heartbeat answered with an error code and Kafka's message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class HeartbeatGroup(Protocol):
    """A consumer or Streams group, as the shared timers and admin see it."""

    group_id: str

    @property
    def members(self) -> Mapping[str, HeartbeatMember]: ...

    @property
    def state(self) -> enum.Enum: ...

    def is_empty(self) -> bool: ...


G = TypeVar("G", bound=HeartbeatGroup)
M = TypeVar("M", bound=HeartbeatMember)


class HeartbeatGroupCoordinator(Generic[G, M]):
    KIND: ClassVar[str]  # how log lines name a group: "consumer group", "streams group"
    HELD: ClassVar[str]  # what a member holds and revokes: "partitions", "tasks"
    UNREVOKED: ClassVar[enum.Enum]  # the member state of one asked to revoke

    def __init__(self, config: BrokerConfig, clock: Callable[[], int],
                 save: Callable[[str], None] = lambda group_id: None, group_setting: GroupSetting | None = None) -> None:
        self.config = config
        # kafka-configs --entity-type groups: what a group's coordinator applies (the broker's values without one)
        self._group_setting = group_setting or (lambda group_id, name: int(broker_default(name, config)))
        self.groups: dict[str, G] = {}
        self._clock = clock
        self._save = save  # queue a group's state for the store after it changed

    def fence(self, group: G, member_id: str) -> None:
        raise NotImplementedError

    # lifetime -----------------------------------------------------------------
    def close(self) -> None:
        for group_id in list(self.groups):
            self.drop(group_id)

    def drop(self, group_id: str) -> None:
        """Forget a group (another broker coordinates it now), stopping its members' timers."""
        group = self.groups.pop(group_id, None)
        if group is not None:
            for member in group.members.values():
                member.cancel_timers()

    # timeouts -----------------------------------------------------------------
    def _session_timeout_ms(self, group: G, member: M) -> int:
        raise NotImplementedError

    def schedule_session_timeout(self, group: G, member: M) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timer = asyncio.get_running_loop().call_later(
            self._session_timeout_ms(group, member) / 1000,
            self._session_expired, group.group_id, member.member_id,
        )

    def _start_rebalance_timer(self, group: G, member: M) -> None:
        """A member asked to revoke has its rebalance timeout to do so, else it is fenced."""
        member.rebalance_timer = asyncio.get_running_loop().call_later(
            max(member.rebalance_timeout_ms, 0) / 1000,
            self._rebalance_expired, group.group_id, member.member_id, member.member_epoch,
        )

    def _session_expired(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return
        group.members[member_id].session_timer = None
        log.info("member %s of %s %s: session timed out", member_id, self.KIND, group_id)
        self.fence(group, member_id)
        self._save(group_id)

    def _rebalance_expired(self, group_id: str, member_id: str, epoch: int) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        member.rebalance_timer = None
        if member.state is self.UNREVOKED and member.member_epoch == epoch:
            log.info("member %s of %s %s did not revoke its %s within the rebalance timeout",
                     member_id, self.KIND, group_id, self.HELD)
            self.fence(group, member_id)
            self._save(group_id)

    # offsets ------------------------------------------------------------------
    def validate_fetch(self, group_id: str, member_id: str | None, epoch: int) -> ErrorCode:
        """Kafka's validateOffsetFetch (OffsetFetch v9 names the member)."""
        group = self.groups.get(group_id)
        if group is None or (epoch < 0 and not member_id):
            return ErrorCode.none
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        return ErrorCode.none if epoch == member.member_epoch else ErrorCode.stale_member_epoch

    # admin --------------------------------------------------------------------
    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every group."""
        return [(g.group_id, g.state.value) for g in self.groups.values()]

    def delete(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if not group.is_empty():
            return ErrorCode.non_empty_group
        del self.groups[group_id]
        log.info("%s %s deleted", self.KIND, group_id)
        return ErrorCode.none
