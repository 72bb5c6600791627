"""Group API requests over a raw socket, for tests that need exact versions and errors.

One GroupWire is one client connection; a member waiting in JoinGroup or
SyncGroup holds its connection, so concurrent members use one each.
"""

from __future__ import annotations

import datetime
import struct
import sys
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.messages import make, request_schema
from tests.wire import Wire

JOIN, HEARTBEAT, LEAVE, SYNC = 11, 12, 13, 14
COMMIT, FETCH, FIND, DESCRIBE, LIST, DELETE, OFFSET_DELETE = 8, 9, 10, 15, 16, 42, 47


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0 bytes, as Java and librdkafka send them."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


class GroupWire(Wire):
    def build(self, api_key: int, version: int, **fields: Any) -> Any:
        return make(request_schema(api_key, version), **fields)

    def nested(self, api_key: int, version: int, cls_name: str, /, **fields: Any) -> Any:
        module = sys.modules[request_schema(api_key, version).__module__]
        return make(getattr(module, cls_name), **fields)

    # membership -------------------------------------------------------------------

    def send_join(self, group: str, member_id: str = "", *, version: int = 5, session_ms: int = 3000,
                  rebalance_ms: int = 3000, instance_id: str | None = None, protocol_type: str = "consumer",
                  protocols: tuple[tuple[str, bytes], ...] = (("range", b"meta"),)) -> None:
        body = self.build(
            JOIN, version, group_id=group, session_timeout=ms(session_ms), rebalance_timeout=ms(rebalance_ms),
            member_id=member_id, group_instance_id=instance_id, protocol_type=protocol_type,
            protocols=tuple(self.nested(JOIN, version, "JoinGroupRequestProtocol", name=n, metadata=m)
                            for n, m in protocols),
            reason=None,
        )
        self._pending = (JOIN, version)
        self.send(JOIN, version, body)

    def answer(self) -> Any:
        api_key, version = self._pending
        return self.receive(api_key, version)[1]

    def join(self, group: str, member_id: str = "", **kw: Any) -> Any:
        self.send_join(group, member_id, **kw)
        return self.answer()

    def join_with_id(self, group: str, **kw: Any) -> Any:
        """JoinGroup v4+: the MEMBER_ID_REQUIRED round trip, then the real join."""
        first = self.join(group, **kw)
        if first.error_code != ErrorCode.member_id_required:
            return first
        return self.join(group, first.member_id, **kw)

    def send_sync(self, group: str, generation: int, member_id: str, assignments: dict[str, bytes] | None = None,
                  *, version: int = 3, instance_id: str | None = None, protocol_type: str | None = None,
                  protocol_name: str | None = None) -> None:
        body = self.build(
            SYNC, version, group_id=group, generation_id=generation, member_id=member_id,
            group_instance_id=instance_id, protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=tuple(self.nested(SYNC, version, "SyncGroupRequestAssignment", member_id=k, assignment=v)
                              for k, v in (assignments or {}).items()),
        )
        self._pending = (SYNC, version)
        self.send(SYNC, version, body)

    def sync(self, *args: Any, **kw: Any) -> Any:
        self.send_sync(*args, **kw)
        return self.answer()

    def heartbeat(self, group: str, generation: int, member_id: str, *, version: int = 3,
                  instance_id: str | None = None) -> ErrorCode:
        body = self.build(HEARTBEAT, version, group_id=group, generation_id=generation, member_id=member_id,
                          group_instance_id=instance_id)
        return self.request(HEARTBEAT, version, body).error_code

    def leave(self, group: str, members: list[tuple[str, str | None]], *, version: int = 3) -> Any:
        if version < 3:
            body = self.build(LEAVE, version, group_id=group, member_id=members[0][0])
        else:
            body = self.build(LEAVE, version, group_id=group, members=tuple(
                self.nested(LEAVE, version, "MemberIdentity", member_id=m, group_instance_id=i, reason=None)
                for m, i in members))
        return self.request(LEAVE, version, body)

    # offsets ----------------------------------------------------------------------

    def commit(self, group: str, offsets: dict[str, dict[int, tuple[int, str | None]]], *, generation: int = -1,
               member_id: str = "", version: int = 8) -> dict[tuple[str, int], ErrorCode]:
        topics = tuple(
            self.nested(COMMIT, version, "OffsetCommitRequestTopic", name=name, partitions=tuple(
                self.nested(COMMIT, version, "OffsetCommitRequestPartition", partition_index=p,
                            committed_offset=o, committed_leader_epoch=-1, committed_metadata=md)
                for p, (o, md) in parts.items()))
            for name, parts in offsets.items()
        )
        body = self.build(COMMIT, version, group_id=group, generation_id_or_member_epoch=generation,
                          member_id=member_id, group_instance_id=None, retention_time=ms(-1), topics=topics)
        response = self.request(COMMIT, version, body)
        return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}

    def fetch(self, group: str, topics: dict[str, list[int]] | None, *, version: int = 7) -> dict[str, dict]:
        wanted = None if topics is None else tuple(
            self.nested(FETCH, version, "OffsetFetchRequestTopic", name=n, partition_indexes=tuple(ps))
            for n, ps in topics.items())
        response = self.request(FETCH, version, self.build(FETCH, version, group_id=group, topics=wanted,
                                                           require_stable=False))
        return {t.name: {p.partition_index: (p.committed_offset, p.metadata, p.error_code)
                         for p in t.partitions} for t in response.topics}

    def describe(self, *groups: str, version: int = 5) -> Any:
        body = self.build(DESCRIBE, version, groups=groups, include_authorized_operations=False)
        return self.request(DESCRIBE, version, body).groups

    def list_groups(self, states: tuple[str, ...] = (), *, version: int = 4) -> dict[str, str]:
        response = self.request(LIST, version, self.build(LIST, version, states_filter=states, types_filter=()))
        assert response.error_code == ErrorCode.none
        return {g.group_id: getattr(g, "group_state", "") for g in response.groups}

    def delete_groups(self, *groups: str, version: int = 2) -> dict[str, ErrorCode]:
        response = self.request(DELETE, version, self.build(DELETE, version, groups_names=groups))
        return {r.group_id: r.error_code for r in response.results}

    def offset_delete(self, group: str, topics: dict[str, list[int]]) -> Any:
        body = self.build(OFFSET_DELETE, 0, group_id=group, topics=tuple(
            self.nested(OFFSET_DELETE, 0, "OffsetDeleteRequestTopic", name=n, partitions=tuple(
                self.nested(OFFSET_DELETE, 0, "OffsetDeleteRequestPartition", partition_index=p) for p in ps))
            for n, ps in topics.items()))
        return self.request(OFFSET_DELETE, 0, body)
