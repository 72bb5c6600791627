"""Kafka topic names <-> (stream path, topic).

Three spellings reach the same topic:
  orders                              plain name: the default stream
  /apps/iot/oilpump_metrics:Pressure  canonical MapR name
  apps.iot.oilpump_metrics..Pressure  Kafka-legal alias ('/' -> '.', ':' -> '..')
Stream path components cannot contain '.', so the first '..' always ends the
path part; for that reason plain names in the default stream may not contain
'..'.
"""

from __future__ import annotations

import re

MAX_KAFKA_NAME = 249
_LEGAL = re.compile(r"[A-Za-z0-9._-]+")


class TopicNameError(ValueError):
    pass


def split_name(name: str, default_stream: str) -> tuple[str, str]:
    """(stream path, topic) for any of the three spellings."""
    if not name:
        raise TopicNameError("topic name must not be empty")
    if ":" in name:
        path, _, topic = name.partition(":")
        if not path.startswith("/"):
            raise TopicNameError(f"{name!r}: a stream path must start with '/'")
        return path, topic
    if name.startswith("/"):
        raise TopicNameError(f"{name!r} names a stream, not a topic (use /path:topic)")
    if ".." in name:
        left, _, topic = name.partition("..")
        return "/" + left.replace(".", "/"), topic
    return default_stream, name


def kafka_alias(stream: str, topic: str, default_stream: str) -> str:
    """The Kafka-legal name of a topic (its plain name in the default stream)."""
    if stream == default_stream:
        return topic
    return stream[1:].replace("/", ".") + ".." + topic


# Clients (by the software name they send in ApiVersions) that refuse any topic
# name outside Kafka's legal characters, also in metadata they did not ask for
# by name: kafka-python's pattern subscription matches the listed names and
# then rejects '/stream:topic' with a ValueError; Kafka's own Java tools
# (kafka-topics --describe/--delete, kafka-configs, kafka-get-offsets,
# kafka-consumer-groups) find a topic by matching the name they were given
# against the listed names and trip on ':' themselves, so they need the alias
# listed. They are listed aliases.
LEGAL_NAMES_ONLY = frozenset({"kafka-python", "apache-kafka-java"})


def canonical_name(stream: str, topic: str, default_stream: str) -> str:
    if stream == default_stream:
        return topic
    return f"{stream}:{topic}"


def is_kafka_legal(name: str) -> bool:
    return len(name) <= MAX_KAFKA_NAME and bool(_LEGAL.fullmatch(name)) and name not in (".", "..")
