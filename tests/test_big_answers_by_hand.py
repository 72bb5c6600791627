"""An answer about many topics (written by hand, in slices) is the answer about a few (kio's), byte for byte.

From ENCODED_FROM topics on, Metadata and DescribeTopicPartitions write each
topic entry with protocol/topic_entries.py instead of kio (issue 32: a
million topics took about a minute to answer). Here the threshold is lowered
so that both paths answer the same requests about the same broker, at every
version a client may ask, and their answers must not differ by a byte.
"""

from __future__ import annotations

import pytest
from kafkacompat.protocol.messages import make, request_schema

from kafkacompat.handlers import SUPPORTED
from kafkacompat.handlers import describe_topic_partitions as describe_handler
from kafkacompat.handlers import metadata as metadata_handler
from kafkacompat.testing import Broker
from tests.wire import Wire

METADATA, DESCRIBE_TOPIC_PARTITIONS = 3, 75
VERSIONS = range(SUPPORTED[METADATA][0], SUPPORTED[METADATA][1] + 1)


def _request(version: int, names: list[str] | None, operations: bool) -> object:
    m = request_schema(METADATA, version)
    fields: dict[str, object] = {"topics": None if names is None else tuple(
        make(getattr(__import__(m.__module__, fromlist=["_"]), "MetadataRequestTopic"), name=name,
             **({"topic_id": None} if version >= 10 else {})) for name in names)}
    if version == 0 and names is None:
        fields["topics"] = ()  # v0 asks for every topic with an empty list
    if version >= 4:
        fields["allow_auto_topic_creation"] = False
    if version >= 8:
        fields["include_topic_authorized_operations"] = operations
    if 8 <= version <= 10:
        fields["include_cluster_authorized_operations"] = operations
    return make(m, **fields)


def _body(wire: Wire, version: int, request: object, api_key: int = METADATA) -> bytes:
    """The answer's bytes after its correlation id (the same request gets the next id each time)."""
    wire.send(api_key, version, request)
    return wire.read_frame()[4:]


@pytest.fixture(scope="module")
def broker() -> Broker:
    with Broker() as broker:
        broker.create_topic("orders", 3)
        broker.create_topic("a", 1)
        broker.create_topic("/apps/iot:sensors", 2)
        yield broker


@pytest.mark.parametrize("version", VERSIONS)
def test_the_hand_written_answer_is_kios(broker: Broker, version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    asks = [(None, False), (None, True), (["orders", "missing", "/apps/iot:sensors"], True)]
    with Wire(broker.bootstrap_servers) as wire:
        for names, operations in asks:
            request = _request(version, names, operations)
            monkeypatch.setattr(metadata_handler, "ENCODED_FROM", 10**9)
            by_kio = _body(wire, version, request)
            monkeypatch.setattr(metadata_handler, "ENCODED_FROM", 1)
            by_hand = _body(wire, version, request)
            assert by_hand == by_kio, (names, operations)
            if names is None:
                assert b"orders" in by_hand and b"sensors" in by_hand


def test_the_hand_written_page_is_kios(broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    m = request_schema(DESCRIBE_TOPIC_PARTITIONS, 0)
    nested = __import__(m.__module__, fromlist=["_"])
    asks = [((), 2000, None), ((), 2, None), ((), 3, make(nested.Cursor, topic_name="orders", partition_index=1)),
            (("orders", "missing", "/apps/iot:sensors", "bad name!"), 2000, None)]
    with Wire(broker.bootstrap_servers) as wire:
        for names, limit, cursor in asks:
            request = make(m, topics=tuple(make(nested.TopicRequest, name=name) for name in names),
                           response_partition_limit=limit, cursor=cursor)
            monkeypatch.setattr(describe_handler, "ENCODED_FROM", 10**9)
            by_kio = _body(wire, 0, request, DESCRIBE_TOPIC_PARTITIONS)
            monkeypatch.setattr(describe_handler, "ENCODED_FROM", 1)
            by_hand = _body(wire, 0, request, DESCRIBE_TOPIC_PARTITIONS)
            assert by_hand == by_kio, (names, limit, cursor)
            assert b"orders" in by_hand or b"sensors" in by_hand
