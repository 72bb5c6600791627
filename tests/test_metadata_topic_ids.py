"""Metadata v12 by topic id (KIP-516), as Kafka's Java client 4.x asks it.

A KIP-848 assignment names topics by id; kafka-clients 4.x (a
SubscriptionPattern subscription) then asks Metadata for those ids with an
empty name, not a null one, and takes the names from the answer. Until it
has them it holds no partition, so a wrong answer leaves it assigned by the
broker and reading nothing.
"""

from __future__ import annotations

import uuid

import pytest
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.wire import Wire

METADATA = 3


def _metadata_v12(wire: Wire, topics: list[tuple[str | None, uuid.UUID | None]]) -> list[tuple]:
    """(error, name, topic id, partition count) per topic of a v12 answer to (name, id) pairs."""
    import kio.schema.metadata.v12.request as m

    request = make(m.MetadataRequest, topics=tuple(make(m.MetadataRequestTopic, name=name, topic_id=topic_id)
                                                   for name, topic_id in topics),
                   allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    answer = wire.request(METADATA, 12, request)
    return [(t.error_code, t.name, t.topic_id, len(t.partitions)) for t in answer.topics]


@pytest.mark.parametrize("name", ["", None], ids=["empty name (Java 4.x)", "null name"])
def test_v12_finds_topics_by_id_whatever_the_name_says(name: str | None) -> None:
    with Broker() as broker:
        store = broker.server.store
        broker.call(store.create_topic(store.default_stream, "orders", 3))
        with Wire(broker.bootstrap_servers) as wire:
            [(_, _, orders, _)] = _metadata_v12(wire, [("orders", None)])
            nobody = uuid.uuid4()
            found = _metadata_v12(wire, [(name, orders), (name, nobody)])
    assert found == [(ErrorCode.none, "orders", orders, 3), (ErrorCode.unknown_topic_id, None, nobody, 0)]
