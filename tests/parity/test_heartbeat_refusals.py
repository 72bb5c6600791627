"""ConsumerGroupHeartbeat and ShareGroupHeartbeat refused before the coordinator is asked, as Kafka 4.1 answers.

KafkaApis answers these refusals (protocol switched off, GROUP_ or
TOPIC_AUTHORIZATION_FAILED) with the request's getErrorResponse, which sets
the error code alone: member_epoch keeps its default 0, not the -1 of a
member that left, and there is no error message. Share groups switched off
(share.version 0, Kafka 4.1's default) show it on both brokers; the
authorization refusals are kafkacompat's alone here (a Kafka with an
authorizer and SASL users costs a broker start of its own).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.wire import Wire, request_class

CONSUMER_HEARTBEAT, SHARE_HEARTBEAT = 68, 76


def _share_join(bootstrap: str) -> tuple:
    with Wire(bootstrap) as wire:
        answer = wire.request(SHARE_HEARTBEAT, 1, make(
            request_class(SHARE_HEARTBEAT, 1), group_id="refused", member_id="m1", member_epoch=0, rack_id=None,
            subscribed_topic_names=("t",)))
    return answer.error_code, answer.error_message, answer.member_id, answer.member_epoch, answer.assignment


def _consumer_join(bootstrap: str) -> tuple:
    with Wire(bootstrap) as wire:
        answer = wire.request(CONSUMER_HEARTBEAT, 0, make(
            request_class(CONSUMER_HEARTBEAT, 0), group_id="refused", member_id="m1", member_epoch=0,
            instance_id=None, rack_id=None, rebalance_timeout=datetime.timedelta(minutes=1), subscribed_topic_names=("t",),
            server_assignor=None, topic_partitions=()))
    return answer.error_code, answer.error_message, answer.member_id, answer.member_epoch, answer.assignment


@pytest.fixture(scope="module")
def ours_without_share_groups() -> Iterator[Broker]:
    with Broker(share_version=0) as running:
        yield running


@pytest.fixture(scope="module")
def ours_authorizing() -> Iterator[Broker]:
    """Every client here is ANONYMOUS on PLAINTEXT, granted nothing."""
    with Broker(authorizer=True) as running:
        yield running


def test_share_heartbeat_with_share_groups_off_is_refused_as_kafka_refuses_it(ours_without_share_groups: Broker,
                                                                              kafka41) -> None:
    seen = {side: _share_join(bootstrap) for side, bootstrap in (
        ("kafkacompat", ours_without_share_groups.bootstrap_servers), ("kafka", kafka41.bootstrap_servers))}
    assert seen["kafkacompat"] == seen["kafka"] == (ErrorCode.unsupported_version, None, None, 0, None)


@pytest.mark.parametrize("join", [_consumer_join, _share_join], ids=["consumer", "share"])
def test_a_heartbeat_refused_the_group_answers_member_epoch_0(ours_authorizing: Broker, join) -> None:
    assert join(ours_authorizing.bootstrap_servers) == (ErrorCode.group_authorization_failed, None, None, 0, None)
