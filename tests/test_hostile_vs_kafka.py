"""The same hostile input on Apache Kafka 4.1 and on kafkacompat: the same answers.

Where kafkacompat answers differently on purpose, the difference is listed
with its reason and checked too.
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator

import kio.schema.create_topics.v7.request as create_v7
import pytest
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from compat_tests.reference import session_reference_kafka
from kafkacompat.testing import Broker
from tests import poison_batches as poison
from tests.hostile_frames import create_partitions_207gb, create_topics_null_topics
from tests.test_bad_input import PRODUCE_V, produce_request
from tests.test_hostile_input import _create_partitions, _create_topics
from tests.wire import Wire

pytestmark = pytest.mark.slow

# Kafka 4.1's answer differs, and kafkacompat's is the one the issue asks for:
ON_PURPOSE = {
    # Kafka fails with UNKNOWN_SERVER_ERROR (an IllegalArgumentException from its varint reader)
    "junk_records": (ErrorCode.unknown_server_error, ErrorCode.corrupt_message),
    "gzip_flag_over_plain_body": (ErrorCode.unknown_server_error, ErrorCode.corrupt_message),
    # Kafka stores it, and librdkafka then delivers one record several times
    "same_offset_delta": (ErrorCode.none, ErrorCode.invalid_record),
    # Kafka inflates it whole (it holds one 256 MiB record) and stores it
    "gzip_bomb": (ErrorCode.none, ErrorCode.invalid_record),
}


@pytest.fixture(scope="module")
def kafka() -> str:
    """The session's Kafka 4.1 (compat_tests/reference.py): nothing here needs a setting of its own."""
    return session_reference_kafka().bootstrap_servers


@pytest.fixture(scope="module")
def ours() -> Iterator[str]:
    with Broker() as broker:
        yield broker.bootstrap_servers


def _answers(bootstrap: str) -> dict[str, ErrorCode]:
    topic = f"poison-{uuid.uuid4().hex[:8]}"
    out = {}
    with Wire(bootstrap, timeout=60) as wire:
        assert _create_topics(wire, [(topic, 1)])[topic][0] == ErrorCode.none
        deadline = time.monotonic() + 30  # Kafka answers NOT_LEADER until the new partition has a leader
        while (code := _produce(wire, topic, poison.good())) != ErrorCode.none:
            assert time.monotonic() < deadline, code
            time.sleep(0.2)
        for name, build in poison.POISON.items():
            out[name] = _produce(wire, topic, build())
    return out


def _produce(wire: Wire, topic: str, batch: bytes) -> ErrorCode:
    response = wire.request(0, PRODUCE_V, produce_request(topic, batch))
    return response.responses[0].partition_responses[0].error_code


def test_poison_batches_get_kafkas_answers(kafka: str, ours: str) -> None:
    theirs, mine = _answers(kafka), _answers(ours)
    for name in poison.POISON:
        expected = ON_PURPOSE.get(name, (theirs[name], theirs[name]))
        assert (theirs[name], mine[name]) == expected, name


def test_partition_limits_match(kafka: str, ours: str) -> None:
    results = []
    for bootstrap in (kafka, ours):
        name = f"limits-{uuid.uuid4().hex[:8]}"
        with Wire(bootstrap, timeout=60) as wire:
            results.append((
                _create_topics(wire, [(name, 1_000_000)])[name],
                sorted(_create_topics(wire, [(name + "a", 6000), (name + "b", 6000)], validate_only=True).values()),
                _create_topics(wire, [(name, 0)])[name][0],
                _create_topics(wire, [(name, 1)])[name][0],
                _create_partitions(wire, name, 1)[0],
            ))
    assert results[0] == results[1]


def _create_in_order(wire: Wire, specs: list[tuple[str, int]]) -> list[tuple[str, ErrorCode, str | None]]:
    request = make(create_v7.CreateTopicsRequest, topics=tuple(
        make(create_v7.CreatableTopic, name=name, num_partitions=count, replication_factor=-1, assignments=(), configs=())
        for name, count in specs), timeout=datetime.timedelta(seconds=30), validate_only=False)
    return [(t.name, t.error_code, t.error_message) for t in wire.request(19, 7, request).topics]


def test_a_name_given_twice_in_one_create_topics_is_answered_as_kafka_answers(kafka: str, ours: str) -> None:
    """Kafka answers a name given twice once, after the other topics, INVALID_REQUEST, and creates
    neither copy; the request's other topics are created."""
    results = []
    for bootstrap in (kafka, ours):
        base = f"twice-{uuid.uuid4().hex[:8]}"
        role = {f"{base}-{r}": r for r in ("a", "dup", "b")}
        with Wire(bootstrap, timeout=60) as wire:
            answer = _create_in_order(wire, [(f"{base}-a", 1), (f"{base}-dup", 1), (f"{base}-b", 2),
                                             (f"{base}-dup", 2)])
            again = _create_in_order(wire, [(f"{base}-dup", 1), (f"{base}-a", 1)])
        results.append(([(role[n], code, message) for n, code, message in answer],
                        [(role[n], code) for n, code, _ in again]))
    assert results[0] == results[1]
    assert results[1][0][-1] == ("dup", ErrorCode.invalid_request, "Duplicate topic name.")


@pytest.mark.parametrize("frame", [create_partitions_207gb(), create_topics_null_topics(7), create_topics_null_topics(4)])
def test_malformed_frames_close_the_connection_on_both(kafka: str, ours: str, frame: bytes) -> None:
    for bootstrap in (kafka, ours):
        with Wire(bootstrap) as wire:
            wire.send_raw(frame)
            assert wire.is_closed(timeout=10), bootstrap
