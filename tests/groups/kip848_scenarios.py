"""KIP-848 scenarios driven over the wire; each returns what a client would observe.

The same function runs against kafkacompat and against Kafka 4.1; tests
assert properties of the observation and, for the reference run, that the
two observations are equal. Member ids are random, so observations name
members by role or instance id, topics by the scenario's own names.
"""

from __future__ import annotations

import struct
import time
import uuid
from typing import Any

from confluent_kafka.admin import AdminClient, NewPartitions
from kafkacompat.protocol.messages import make

from kafkacompat.groups.consumer_protocol import encode_assignment, parse_assignment
from tests.groups.helpers import commit, create_topic, heartbeat, join, join_member, leave, module, sync
from tests.groups.kip848 import RawMember, describe, settle, targets_are_current, topic_names
from tests.wire import Wire


def _names(prefix: str, *topics: tuple[str, int], bootstrap: str) -> list[str]:
    """Create the topics and wait until the group coordinator assigns them.

    Kafka's coordinator learns of a new topic a moment after Metadata lists it.
    """
    names = []
    for suffix, partitions in topics:
        name = f"{prefix}-{suffix}"
        create_topic(bootstrap, name, partitions)
        names.append(name)
    probe = RawMember(bootstrap, f"probe-{prefix}", tuple(names))
    try:
        deadline = time.monotonic() + 20
        while sum(len(p) for p in probe.owned.values()) < sum(n for _, n in topics):
            assert time.monotonic() < deadline, f"the coordinator never assigned {names}"
            probe.heartbeat()
            time.sleep(0.1)
        probe.leave()
    finally:
        probe.close()
    return names


def _ids(bootstrap: str, names: list[str]) -> dict[uuid.UUID, str]:
    with Wire(bootstrap) as wire:
        deadline = time.monotonic() + 15
        while True:
            found = topic_names(wire, names)
            if len(found) == len(names) and all(found) or time.monotonic() > deadline:
                return found
            time.sleep(0.2)


def _described_when_targets_are_current(wire: Wire, group: str, timeout: float = 10.0) -> Any:
    """Describe the group once every member holds its target, or as it stands after `timeout`.

    A member's assignment in the answer is what it acknowledged in its last heartbeat; the
    coordinator can still be writing the target a moment after the members' own views settle.
    """
    deadline = time.monotonic() + timeout
    while True:
        described = describe(wire, group)[0]
        if targets_are_current(described) or time.monotonic() > deadline:
            return described
        time.sleep(0.2)


def _tag() -> str:
    return uuid.uuid4().hex[:8]


def range_static(bootstrap: str) -> dict[str, Any]:
    """Three static members with the range assignor; then one leaves."""
    tag = _tag()
    names = _names(f"r{tag}", ("a", 6), ("b", 3), bootstrap=bootstrap)
    ids = _ids(bootstrap, names)
    members = [RawMember(bootstrap, f"g-{tag}", tuple(names), instance_id=f"i{i}", assignor="range") for i in range(3)]
    try:
        settle(members)
        first = {m.instance_id: _short(m.named(ids), tag) for m in members}
        described = _described_when_targets_are_current(members[0].wire, f"g-{tag}")
        shape = {
            "state": described.group_state,
            "assignor": described.assignor_name,
            "epochs_agree": len({d.member_epoch for d in described.members} | {described.assignment_epoch}) == 1,
            "member_type": sorted({d.member_type for d in described.members}),
            "targets_are_current": targets_are_current(described),
            "subscribed": sorted(tuple(sorted(_short({n: [] for n in d.subscribed_topic_names}, tag))) for d in described.members),
        }
        left = members[1].leave()
        settle([members[0], members[2]])
        after = {m.instance_id: _short(m.named(ids), tag) for m in (members[0], members[2])}
        return {"first": first, "describe": shape, "leave": (left.error_code, left.member_epoch), "after": after}
    finally:
        for m in members:
            m.close()


def _short(named: dict[str, list[int]], tag: str) -> dict[str, list[int]]:
    return {name.split("-", 1)[1] if name.startswith(("r", "u", "v", "s", "p")) and tag in name else name: parts
            for name, parts in named.items()}


def uniform_chunks(bootstrap: str) -> dict[str, Any]:
    """Three dynamic members, one 7-partition topic, the default (uniform) assignor."""
    tag = _tag()
    names = _names(f"u{tag}", ("c", 7), bootstrap=bootstrap)
    ids = _ids(bootstrap, names)
    members = [RawMember(bootstrap, f"g-{tag}", tuple(names)) for _ in range(3)]
    try:
        settle(members)
        chunks = [m.named(ids).get(names[0], []) for m in members]
        described = describe(members[0].wire, f"g-{tag}")[0]
        return {
            "sizes": sorted(len(c) for c in chunks),
            "contiguous": all(c == list(range(c[0], c[0] + len(c))) for c in chunks if c),
            "union": sorted(p for c in chunks for p in c),
            "assignor": described.assignor_name,
            "interval_ms": members[0].last.heartbeat_interval.total_seconds() * 1000,
        }
    finally:
        for m in members:
            m.close()


def uniform_heterogeneous(bootstrap: str) -> dict[str, Any]:
    """Members subscribed to different topics: every partition once, to a subscriber, sizes within one.

    Which balanced split comes out is the assignor's choice (Kafka's 4.1
    heterogeneous builder and this one may pick different ones).
    """
    tag = _tag()
    t1, t2, t3 = _names(f"h{tag}", ("a", 4), ("b", 4), ("c", 2), bootstrap=bootstrap)
    ids = _ids(bootstrap, [t1, t2, t3])
    subscriptions = [(t1,), (t1, t2), (t2, t3)]
    members = [RawMember(bootstrap, f"g-{tag}", s) for s in subscriptions]
    try:
        settle(members)
        owners = [(t, p) for m in members for t, parts in m.named(ids).items() for p in parts]
        sizes = [sum(len(p) for p in m.named(ids).values()) for m in members]
        return {
            "each partition once": sorted(owners) == sorted({(t, p) for t, n in ((t1, 4), (t2, 4), (t3, 2)) for p in range(n)}),
            "only subscribed topics": all(set(m.named(ids)) <= set(s) for s, m in zip(subscriptions, members)),
            "spread": max(sizes) - min(sizes),
        }
    finally:
        for m in members:
            m.close()


def revoke_before_assign(bootstrap: str) -> list[tuple[str, int, list[int] | None]]:
    """A second member joins a one-member group: the first revokes before the second is given anything."""
    tag = _tag()
    names = _names(f"v{tag}", ("t", 6), bootstrap=bootstrap)
    ids = _ids(bootstrap, names)
    one, two = (RawMember(bootstrap, f"g-{tag}", tuple(names)) for _ in range(2))
    steps: list[tuple[str, int, list[int] | None]] = []
    base = 0

    def step(who: str, member: RawMember, owned: dict[uuid.UUID, set[int]] | None = None) -> None:
        answer = member.heartbeat(owned=owned)
        assert answer.error_code == 0, answer
        given = None if answer.assignment is None else sorted(
            p for tp in answer.assignment.topic_partitions for p in tp.partitions
        )
        steps.append((who, answer.member_epoch - base, given))

    try:
        # Kafka's coordinator may see a new topic a moment after Metadata does: wait until one owns it all
        deadline = time.monotonic() + 15
        one.heartbeat()
        while sum(len(p) for p in one.owned.values()) < 6:
            assert time.monotonic() < deadline, "the first member never got the topic"
            time.sleep(0.1)
            one.heartbeat()
        base = one.epoch
        step("two joins", two)
        step("one told to revoke", one, owned={t: set(range(6)) for t in ids})
        step("two waits", two)
        step("one revoked", one)
        step("two gets partitions", two)
        return steps
    finally:
        one.close()
        two.close()


def static_rejoin(bootstrap: str) -> dict[str, Any]:
    """A static member leaves with epoch -2 and comes back under a new member id."""
    tag = _tag()
    names = _names(f"s{tag}", ("t", 4), bootstrap=bootstrap)
    ids = _ids(bootstrap, names)
    group = f"g-{tag}"
    a, b = (RawMember(bootstrap, group, tuple(names), instance_id=f"i{i}", assignor="range") for i in range(2))
    try:
        settle([a, b])
        owned_before = a.named(ids)
        clash = RawMember(bootstrap, group, tuple(names), instance_id="i0").heartbeat()
        gone = a.leave(epoch=-2)
        while_gone = {d.instance_id: d.member_epoch for d in describe(b.wire, group)[0].members}
        back = RawMember(bootstrap, group, tuple(names), instance_id="i0", assignor="range")
        answer = back.heartbeat()
        result = {
            "clash": (clash.error_code, clash.error_message.replace(a.member_id, "A").split(" with ")[1] if clash.error_message else None),
            "leave": (gone.error_code, gone.member_epoch),
            "while_gone": sorted(while_gone.items()),
            "rejoin_error": answer.error_code,
            "rejoin_same_partitions": back.named(ids) == owned_before,
            "b_epoch_unchanged": b.heartbeat().member_epoch == b.epoch,
        }
        back.close()
        return result
    finally:
        a.close()
        b.close()


def heartbeat_errors(bootstrap: str) -> list[tuple[str, int, str | None]]:
    """Requests Kafka refuses, and how (codes and messages, member ids masked)."""
    tag = _tag()
    names = _names(f"e{tag}", ("t", 2), bootstrap=bootstrap)
    group = f"g-{tag}"
    out = []
    first = RawMember(bootstrap, group, tuple(names))
    first.heartbeat()

    def record(what: str, member: RawMember, **kwargs: Any) -> None:
        answer = member.heartbeat(**kwargs)
        message = answer.error_message
        if message and member.member_id:
            message = message.replace(member.member_id, "<member>").replace(tag, "<tag>")
        out.append((what, int(answer.error_code), message))
        member.close()

    record("unsupported assignor", RawMember(bootstrap, group, tuple(names), assignor="sticky"))
    record("unknown group", RawMember(bootstrap, f"nope-{tag}", tuple(names)), epoch=3)
    record("unknown member", RawMember(bootstrap, group, tuple(names)), epoch=3)
    record("epoch ahead", RawMember(bootstrap, group, tuple(names), member_id=first.member_id), epoch=first.epoch + 5)
    record("no subscription", RawMember(bootstrap, group))
    record("empty member id", RawMember(bootstrap, group, tuple(names), member_id=""))
    record("bad epoch", RawMember(bootstrap, group, tuple(names)), epoch=-3)
    record("static leave without instance", RawMember(bootstrap, group, tuple(names)), epoch=-2)
    record("unknown instance leaves", RawMember(bootstrap, group, tuple(names), instance_id="zz"), epoch=-2)
    record("leave unknown group", RawMember(bootstrap, f"nope-{tag}", tuple(names)), epoch=-1)
    first.close()
    return out


def commits_with_epochs(bootstrap: str) -> dict[str, Any]:
    """OffsetCommit v9 / OffsetFetch v9 name the member and its epoch."""
    tag = _tag()
    names = _names(f"o{tag}", ("t", 2), bootstrap=bootstrap)
    group = f"g-{tag}"
    member = RawMember(bootstrap, group, tuple(names))
    try:
        settle([member])
        offsets = {(names[0], 0): (5, "m")}
        wire = member.wire
        result = {
            "current epoch": commit(wire, 9, group, offsets, generation=member.epoch, member_id=member.member_id)[(names[0], 0)],
            "stale epoch": commit(wire, 9, group, offsets, generation=member.epoch - 1, member_id=member.member_id)[(names[0], 0)],
            "unknown member": commit(wire, 9, group, offsets, generation=member.epoch, member_id="x")[(names[0], 0)],
            "v8 from a member": commit(wire, 8, group, offsets, generation=member.epoch, member_id=member.member_id)[(names[0], 0)],
            "admin commit to a live group": commit(wire, 9, group, offsets)[(names[0], 0)],
        }
        m = module(9, 9)

        def fetch(member_id: str | None, epoch: int) -> tuple[int, list[int]]:
            body = make(
                m.OffsetFetchRequest, require_stable=False,
                groups=(make(m.OffsetFetchRequestGroup, group_id=group, member_id=member_id, member_epoch=epoch,
                             topics=(make(m.OffsetFetchRequestTopics, name=names[0], partition_indexes=(0,)),)),),
            )
            g = wire.request(9, 9, body).groups[0]
            return int(g.error_code), [p.committed_offset for t in g.topics for p in t.partitions]

        result["fetch current"] = fetch(member.member_id, member.epoch)
        result["fetch stale"] = fetch(member.member_id, member.epoch + 1)[0]
        result["fetch admin"] = fetch(None, -1)
        return result
    finally:
        member.close()


def admin_view(bootstrap: str) -> dict[str, Any]:
    """ListGroups v5 filters, DescribeGroups v5 and v6 and DeleteGroups on a consumer group."""
    tag = _tag()
    names = _names(f"l{tag}", ("t", 2), bootstrap=bootstrap)
    group = f"g-{tag}"
    member = RawMember(bootstrap, group, tuple(names))
    try:
        settle([member])
        wire = member.wire

        def listed(**filters: tuple[str, ...]) -> Any:
            m = module(16, 5)
            body = make(m.ListGroupsRequest, **{"states_filter": (), "types_filter": (), **filters})
            return {(g.protocol_type, g.group_state, g.group_type) for g in wire.request(16, 5, body).groups if g.group_id == group}

        def delete() -> int:
            m = module(42, 2)
            return int(wire.request(42, 2, make(m.DeleteGroupsRequest, groups_names=(group,))).results[0].error_code)

        m15 = module(15, 5)
        classic = wire.request(15, 5, make(m15.DescribeGroupsRequest, groups=(group,), include_authorized_operations=False)).groups[0]
        m15 = module(15, 6)  # v6 (KIP-1043): an id naming no classic group is GROUP_ID_NOT_FOUND, with a message
        v6 = wire.request(15, 6, make(m15.DescribeGroupsRequest, groups=(group, f"missing-{tag}"),
                                      include_authorized_operations=False)).groups
        result = {
            "listed": listed(),
            "consumer type": listed(types_filter=("consumer",)),
            "classic type": listed(types_filter=("classic",)),
            "stable state": listed(states_filter=("stable",)),
            "empty state": listed(states_filter=("empty",)),
            "describe classic api": (int(classic.error_code), classic.group_state, classic.protocol_type, len(classic.members)),
            "describe classic api v6": [(int(g.error_code), (g.error_message or "").replace(tag, "<tag>"), g.group_state,
                                         len(g.members)) for g in v6],
            "delete live": delete(),
        }
        member.leave()
        result["after leave"] = listed()
        result["delete empty"] = delete()
        result["after delete"] = listed()
        return result
    finally:
        member.close()


def classic_groups_and_consumer_joins(bootstrap: str) -> dict[str, Any]:
    """An offsets-only classic group converts on a consumer join; a live group of another protocol type refuses it."""
    tag = _tag()
    names = _names(f"k{tag}", ("t", 2), bootstrap=bootstrap)
    simple, live = f"simple-{tag}", f"live-{tag}"
    with Wire(bootstrap) as wire:
        commit(wire, 9, simple, {(names[0], 0): (3, None)})
        joined = join_member(wire, live, session_ms=10_000, protocol_type="connect", protocols=(("sessioned", b"{}"),))
        assert joined.error_code == 0, joined
        sync(wire, 5, live, joined.generation_id, joined.member_id, {joined.member_id: b""}, protocol_type="connect",
             protocol_name=joined.protocol_name)
        converts = RawMember(bootstrap, simple, tuple(names))
        refused = RawMember(bootstrap, live, tuple(names))
        try:
            a = converts.heartbeat()
            b = refused.heartbeat()
            described = describe(wire, simple, live)
            return {
                "simple converts": (int(a.error_code), a.member_epoch > 0),
                "live refuses": (int(b.error_code), (b.error_message or "").replace(tag, "<tag>")),
                "describe": [(int(d.error_code), (d.error_message or "").replace(tag, "<tag>"), d.group_state) for d in described],
            }
        finally:
            converts.close()
            refused.close()


def _subscription_v0(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0, as an eager classic consumer sends it."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


def online_upgrade(bootstrap: str) -> list[Any]:
    """A classic member, then a consumer-protocol member joins: the group converts and both are served."""
    tag = _tag()
    names = _names(f"m{tag}", ("t", 4), bootstrap=bootstrap)
    ids = _ids(bootstrap, names)
    group = f"g-{tag}"
    protocols = (("range", _subscription_v0(names[0])),)
    seen: list[Any] = []
    with Wire(bootstrap) as wire:
        joined = join_member(wire, group, protocols=protocols, session_ms=10_000)
        classic_id = joined.member_id
        sync(wire, 5, group, joined.generation_id, classic_id, {classic_id: encode_assignment({names[0]: frozenset(range(4))})},
             protocol_type="consumer", protocol_name="range")
        seen.append(("classic group", int(joined.error_code), joined.generation_id))
        member = RawMember(bootstrap, group, tuple(names))
        try:
            answer = member.heartbeat()
            seen.append(("consumer joins", int(answer.error_code), answer.member_epoch - joined.generation_id,
                         member.named(ids)))
            beat = heartbeat(wire, group, joined.generation_id, classic_id)
            seen.append(("classic heartbeat", int(beat.error_code)))
            again = join(wire, 9, group, member_id=classic_id, protocols=protocols, session_ms=10_000)
            seen.append(("classic rejoins", int(again.error_code), again.generation_id - joined.generation_id,
                         again.protocol_type, again.protocol_name, again.leader == classic_id, len(again.members)))
            synced = sync(wire, 5, group, again.generation_id, classic_id, {}, protocol_type="consumer", protocol_name="range")
            seen.append(("classic syncs", int(synced.error_code), parse_assignment(synced.assignment)))
            settle([member])
            seen.append(("consumer settles", member.epoch - joined.generation_id, member.named(ids)))
            beat = heartbeat(wire, group, again.generation_id, classic_id)
            seen.append(("classic heartbeat", int(beat.error_code)))
            described = describe(wire, group)[0]
            seen.append(("describe", described.group_state, sorted((m.member_type, m.member_epoch - joined.generation_id)
                                                                    for m in described.members)))
            left = leave(wire, group, [(classic_id, None)])
            seen.append(("classic leaves", [int(m.error_code) for m in left.members]))
            settle([member])
            seen.append(("consumer alone", member.named(ids)))
        finally:
            member.close()
    def plain(value: Any) -> Any:  # the topic by its suffix, partitions as sorted lists
        if isinstance(value, dict):
            return sorted((k.rsplit("-", 1)[1], sorted(v)) for k, v in value.items())
        return value

    return [tuple(plain(x) for x in row) for row in seen]


def online_downgrade(bootstrap: str) -> list[Any]:
    """The consumer-protocol member of an upgraded group leaves: the classic member is in a classic group again."""
    tag = _tag()
    names = _names(f"d{tag}", ("t", 4), bootstrap=bootstrap)
    group = f"g-{tag}"
    protocols = (("range", _subscription_v0(names[0])),)
    seen: list[Any] = []
    with Wire(bootstrap) as wire:
        joined = join_member(wire, group, protocols=protocols, session_ms=10_000)
        classic_id, base = joined.member_id, joined.generation_id
        sync(wire, 5, group, base, classic_id, {classic_id: encode_assignment({names[0]: frozenset(range(4))})},
             protocol_type="consumer", protocol_name="range")
        member = RawMember(bootstrap, group, tuple(names))
        try:
            member.heartbeat()
            again = join(wire, 9, group, member_id=classic_id, protocols=protocols, session_ms=10_000)
            sync(wire, 5, group, again.generation_id, classic_id, {}, protocol_type="consumer", protocol_name="range")
            settle([member])
            left = member.leave()
            seen.append(("consumer leaves", int(left.error_code), left.member_epoch))
        finally:
            member.close()
        described = describe(wire, group)[0]
        seen.append(("describe", int(described.error_code), (described.error_message or "").replace(tag, "<tag>")))
        beat = heartbeat(wire, group, again.generation_id, classic_id)
        seen.append(("classic heartbeat", int(beat.error_code)))
        rejoined = join(wire, 9, group, member_id=classic_id, protocols=protocols, session_ms=10_000)
        seen.append(("classic rejoins", int(rejoined.error_code), rejoined.generation_id - base,
                     rejoined.leader == classic_id, [m.member_id == classic_id for m in rejoined.members]))
        synced = sync(wire, 5, group, rejoined.generation_id, classic_id,
                      {classic_id: encode_assignment({names[0]: frozenset(range(4))})},
                      protocol_type="consumer", protocol_name="range")
        owned = parse_assignment(synced.assignment) or {}
        seen.append(("classic syncs", int(synced.error_code), sorted((k.rsplit("-", 1)[1], sorted(v)) for k, v in owned.items())))
        m16 = module(16, 5)
        listed = wire.request(16, 5, make(m16.ListGroupsRequest, states_filter=(), types_filter=()))
        seen.append(("listed", [(g.group_type, g.group_state) for g in listed.groups if g.group_id == group]))
    return seen


def partitions_grow(bootstrap: str) -> dict[str, Any]:
    """Partitions added to a subscribed topic are assigned at a new group epoch."""
    tag = _tag()
    names = _names(f"p{tag}", ("t", 2), bootstrap=bootstrap)
    ids = _ids(bootstrap, names)
    members = [RawMember(bootstrap, f"g-{tag}", tuple(names)) for _ in range(2)]
    try:
        settle(members)
        epoch_before = members[0].epoch
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_partitions([NewPartitions(names[0], 4)])[names[0]].result(15)
        deadline = time.monotonic() + 20
        while True:
            settle(members)
            union = sorted(p for m in members for p in m.named(ids).get(names[0], []))
            if union == [0, 1, 2, 3] or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        return {"union": union, "sizes": sorted(len(m.named(ids).get(names[0], [])) for m in members),
                "epoch moved": members[0].epoch > epoch_before}
    finally:
        for m in members:
            m.close()


def session_expiry(bootstrap: str, timeout: float = 30.0) -> dict[str, Any]:
    """A member that stops heartbeating is fenced after the session timeout; its partitions move."""
    tag = _tag()
    names = _names(f"x{tag}", ("t", 4), bootstrap=bootstrap)
    ids = _ids(bootstrap, names)
    alive, silent = (RawMember(bootstrap, f"g-{tag}", tuple(names)) for _ in range(2))
    try:
        settle([alive, silent])
        split = sorted(len(m.named(ids).get(names[0], [])) for m in (alive, silent))
        start = time.monotonic()
        while len(alive.named(ids).get(names[0], [])) < 4 and time.monotonic() - start < timeout:
            time.sleep(alive.last.heartbeat_interval.total_seconds())
            assert alive.heartbeat().error_code == 0
        took = time.monotonic() - start
        late = silent.heartbeat()
        return {"split": split, "alive owns": alive.named(ids).get(names[0], []), "took": took,
                "silent then": int(late.error_code)}
    finally:
        alive.close()
        silent.close()


GROUP_SESSION_MS, GROUP_HEARTBEAT_MS = 8000, 1000  # the group's own, above the broker's 3000 / 500 (kip848.py)


def group_timers_override(bootstrap: str) -> dict[str, Any]:
    """A group's consumer.session.timeout.ms / consumer.heartbeat.interval.ms, set with the Admin API as
    `kafka-configs --entity-type groups` does, override the broker's group.consumer.* for its members."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    tag = _tag()
    group = f"g-{tag}"
    names = _names(f"o{tag}", ("t", 2), bootstrap=bootstrap)
    ids = _ids(bootstrap, names)
    change = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", str(GROUP_SESSION_MS), incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("consumer.heartbeat.interval.ms", str(GROUP_HEARTBEAT_MS),
                    incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([change])[change].result(10)
    alive, silent = (RawMember(bootstrap, group, tuple(names)) for _ in range(2))
    try:
        settle([alive, silent])
        interval_ms = int(alive.last.heartbeat_interval.total_seconds() * 1000)
        silent_since = time.monotonic()
        owned_by_alive = []  # (seconds since the silent member's last heartbeat, partitions the live one owns)
        while len(alive.named(ids).get(names[0], [])) < 2 and time.monotonic() - silent_since < 30:
            time.sleep(0.25)
            assert alive.heartbeat().error_code == 0
            owned_by_alive.append((time.monotonic() - silent_since, len(alive.named(ids).get(names[0], []))))
        took = time.monotonic() - silent_since
        still_there_after_broker_session = all(n == 1 for t, n in owned_by_alive if t < 5.0)
        return {"interval_ms": interval_ms, "kept past the broker's session timeout": still_there_after_broker_session,
                "fenced": len(alive.named(ids).get(names[0], [])) == 2, "took": took,
                "silent then": int(silent.heartbeat().error_code)}
    finally:
        alive.close()
        silent.close()
