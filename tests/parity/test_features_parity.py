"""kafka-features and kafka-cluster unregister: the same steps on kafkacompat and Kafka 4.1, the same output.

The steps run on the session's Kafka 4.1 and leave its levels as they
found them (a new 4.1 cluster's: share.version 0), so the kafkacompat side
starts with share_version 0 too. Epochs differ by design (Kafka's is its
metadata log offset): they are compared as going up.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from compat_tests.reference import KafkaTools, ReferenceKafka, normalize, session_kafka_tools
from kafkacompat.protocol.messages import make
from kafkacompat.testing import Broker
from tests.wire import Wire, request_class

EPOCH = re.compile(r"Epoch: (\d+)")
TIMEOUT = datetime.timedelta(seconds=30)


def _heartbeat(bootstrap: str) -> Any:
    """A KIP-848 consumer joining: refused while group.version is 0."""
    with Wire(bootstrap) as wire:
        return wire.request(68, 0, make(request_class(68, 0), group_id="features-parity", member_id="",
                                        member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout=TIMEOUT,
                                        subscribed_topic_names=("features-parity",), server_assignor=None,
                                        topic_partitions=())).error_code


Step = tuple[str, ...] | Callable[[str], Any]
STEPS: list[Step] = [
    ("describe",),
    ("upgrade", "--feature", "share.version=1", "--dry-run"),
    ("upgrade", "--feature", "share.version=1"),
    ("describe",),
    ("disable", "--feature", "share.version", "--dry-run"),
    ("disable", "--feature", "share.version"),
    ("upgrade", "--feature", "transaction.version=3"),
    ("upgrade", "--feature", "transaction.version=1"),
    ("downgrade", "--feature", "transaction.version=1"),
    ("describe",),
    ("downgrade", "--feature", "transaction.version=2"),
    ("upgrade", "--feature", "transaction.version=2"),
    ("disable", "--feature", "group.version"),
    _heartbeat,
    ("upgrade", "--feature", "group.version=1"),
    ("upgrade", "--feature", "nonexistent.feature=1"),
    ("disable", "--feature", "nonexistent.feature"),
    ("disable", "--feature", "streams.version", "--dry-run"),
    ("upgrade", "--feature", "group.version=1", "--feature", "transaction.version=3", "--feature", "share.version=4"),
    ("upgrade", "--release-version", "4.1-IV1", "--dry-run"),
    ("downgrade", "--release-version", "4.0-IV3", "--dry-run"),
    ("downgrade", "--metadata", "4.0-IV1", "--dry-run"),
    ("downgrade", "--feature", "metadata.version=22", "--dry-run"),
    ("downgrade", "--feature", "metadata.version=22", "--unsafe", "--dry-run"),
    ("upgrade", "--metadata", "4.0-IV3"),
    ("upgrade", "--feature", "metadata.version=28"),
    ("disable", "--feature", "kraft.version"),
    ("upgrade", "--feature", "kraft.version=1", "--dry-run"),
    ("describe",),
]
# A new Kafka 4.1 cluster's levels, which the steps end at; put back should a step fail midway.
RESTORE = (("upgrade", "--feature", "transaction.version=2", "--feature", "group.version=1"),
           ("disable", "--feature", "share.version"))


@pytest.fixture(scope="module")
def kafka_tools() -> KafkaTools:
    """The session's warm tool runner (skips without Kafka 4.1 or javac)."""
    return session_kafka_tools()


@pytest.fixture(scope="module")
def fresh() -> Iterator[Broker]:
    """kafkacompat at a new Kafka 4.1 cluster's levels (share groups off)."""
    with Broker(share_version=0) as running:
        yield running


def _run(tools: KafkaTools, bootstrap: str) -> tuple[list[Any], list[int]]:
    """(each step as the user sees it, the epochs describe printed)."""
    seen: list[Any] = []
    epochs: list[int] = []
    for step in STEPS:
        if callable(step):
            seen.append((step.__name__, step(bootstrap)))
            continue
        done = tools.run("kafka-features", "--bootstrap-server", bootstrap, *step)
        epochs += [int(e) for e in EPOCH.findall(done.out)][:1]
        seen.append((step, done.code, EPOCH.sub("Epoch: <n>", normalize(done.out, bootstrap)),
                     normalize(done.err, bootstrap)))
    unregister = tools.run("kafka-cluster", "unregister", "--bootstrap-server", bootstrap, "--id", "77")
    seen.append(("unregister", unregister.code, normalize(unregister.out, bootstrap),
                 normalize(unregister.err, bootstrap)))
    return seen, epochs


def test_feature_steps_print_what_kafka_prints(fresh: Broker, kafka41: ReferenceKafka, kafka_tools: KafkaTools) -> None:
    try:
        theirs, their_epochs = _run(kafka_tools, kafka41.bootstrap_servers)
    finally:
        for restore in RESTORE:
            kafka_tools.run("kafka-features", "--bootstrap-server", kafka41.bootstrap_servers, *restore)
    mine, my_epochs = _run(kafka_tools, fresh.bootstrap_servers)
    assert mine == theirs
    for epochs in (my_epochs, their_epochs):  # each describe follows a change
        assert epochs == sorted(set(epochs)), epochs
