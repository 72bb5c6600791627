"""Which committed offsets expire: Kafka's offsets.retention.minutes rules, as pure functions.

The group coordinator sweeps every offsets.retention.check.interval.ms and
deletes what these rules select; they are apart from it so that the rules
(which differ for classic groups by state and protocol, and for consumer
groups by subscription) read in one place and need no broker to test.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kafkacompat.storage import Cursor

from ..topic_names import TopicNameError, split_name
from .consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from .group import Group, GroupState

Expired = list[tuple[str, str, int]]  # (stream, topic, partition) of the cursors to delete


def classic_subscribed_topics(group: Group) -> set[str] | None:
    """Topics the members of a classic group of protocol type "consumer" subscribe to; None when unknown."""
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE or group.protocol_name is None:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        try:
            found = subscribed_topics(member.metadata(group.protocol_name))
        except KeyError:
            return None
        if found is None:
            return None
        topics |= found
    return topics


def topic_keys(names: Iterable[str], default_stream: str) -> set[tuple[str, str]]:
    """(stream, topic) of Kafka topic names in any of their spellings (plain, /path:topic, alias)."""
    keys = set()
    for name in names:
        try:
            keys.add(split_name(name, default_stream))
        except TopicNameError:
            continue
    return keys


def expired_unless_kept(
    cursors: Sequence[tuple[str, Cursor]], kept: set[tuple[str, str]], now: int, retention: int,
) -> Expired:
    """Cursors committed at least `retention` ms ago, but none of the (stream, topic)s `kept`."""
    return [
        (s, c.topic, c.partition) for s, c in cursors
        if (s, c.topic) not in kept and now - c.commit_time_ms >= retention
    ]


def expired_of_classic_group(
    group: Group, cursors: Sequence[tuple[str, Cursor]], now: int, retention: int, default_stream: str,
) -> Expired:
    """Kafka's rule for classic groups: all of an Empty group's offsets once it has been empty for the
    retention; by commit time for a group without a protocol (offsets only); by commit time but never
    for subscribed topics in a Stable consumer-protocol group; nothing otherwise."""
    if group.protocol_type is not None and group.is_(GroupState.EMPTY):
        if now - group.state_timestamp_ms >= retention:
            return [(s, c.topic, c.partition) for s, c in cursors]
        return []
    if group.protocol_type is None:
        return expired_unless_kept(cursors, set(), now, retention)
    if group.is_(GroupState.STABLE) and (subscribed := classic_subscribed_topics(group)) is not None:
        return expired_unless_kept(cursors, topic_keys(subscribed, default_stream), now, retention)
    return []
