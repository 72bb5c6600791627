"""What the classic group APIs (JoinGroup, SyncGroup) ask of a coordinator and what it answers.

Shared by the classic coordinator and by consumer groups serving classic
members, so that handlers need not know which kind of group answers.
"""

from __future__ import annotations

import dataclasses

from kio.schema.errors import ErrorCode


@dataclasses.dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool  # JoinGroup v4+: the MEMBER_ID_REQUIRED round trip
    supports_skip_assignment: bool  # JoinGroup v9+
    reason: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # (member id, instance id, metadata)
    skip_assignment: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""
