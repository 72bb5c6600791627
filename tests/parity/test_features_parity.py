"""kafka-features and kafka-cluster unregister: the same steps on kafkacompat and Kafka 4.1, the same output.

The steps run on the session's Kafka 4.1 and leave its levels as they
found them (a new 4.1 cluster's: share.version 0), so the kafkacompat side
starts with share_version 0 too. Epochs differ by design (Kafka's is its
metadata log offset): they are compared as going up.
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import kafka.errors
import pytest
from kafka import KafkaAdminClient
from kafkacompat.protocol.messages import make

from compat_tests.reference import KafkaTools, ReferenceKafka, normalize, session_kafka_tools
from kafkacompat.testing import Broker
from tests.wire import Wire, request_class

EPOCH = re.compile(r"Epoch: (\d+)")
CHANGED = re.compile(r"^(\S+) was (?:up|down)graded to (\d+)\.$", re.M)
DISABLED = re.compile(r"^(\S+) was disabled\.$", re.M)
TIMEOUT = datetime.timedelta(seconds=30)


def _heartbeat(bootstrap: str) -> Any:
    """A KIP-848 consumer joining: refused while group.version is 0."""
    with Wire(bootstrap) as wire:
        return wire.request(68, 0, make(request_class(68, 0), group_id="features-parity", member_id="",
                                        member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout=TIMEOUT,
                                        subscribed_topic_names=("features-parity",), server_assignor=None,
                                        topic_partitions=())).error_code


def _consumer_describe(bootstrap: str) -> Any:
    with Wire(bootstrap) as wire:
        return wire.request(69, 0, make(request_class(69, 0), group_ids=("features-parity",),
                                         include_authorized_operations=False))


def _share_steps(bootstrap: str) -> Any:
    """A share consumer joining, and its group described: refused while share.version is 0."""
    with Wire(bootstrap) as wire:
        joined = wire.request(76, 1, make(request_class(76, 1), group_id="features-parity", member_id="m1",
                                          member_epoch=0, rack_id=None,
                                          subscribed_topic_names=("features-parity",)))
        described = wire.request(77, 1, make(request_class(77, 1), group_ids=("features-parity",),
                                             include_authorized_operations=False))
    return joined.error_code, described


Step = tuple[str, ...] | Callable[[str], Any]
STEPS: list[Step] = [
    ("describe",),
    _share_steps,
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
    _consumer_describe,
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


def _levels(bootstrap: str) -> dict[str, int]:
    with Wire(bootstrap) as wire:
        answer = wire.request(18, 4, make(request_class(18, 4), client_software_name="t", client_software_version="1"))
    return {f.name: f.max_version_level for f in answer.finalized_features}


def _applied(bootstrap: str, wanted: dict[str, int], timeout: float = 10.0) -> None:
    """Wait until the broker reports `wanted` (level 0: left out). Kafka's controller answers once the
    change is committed; its broker applies it a moment later, and ApiVersions reports it then."""
    deadline = time.monotonic() + timeout
    while any(_levels(bootstrap).get(name, 0) != level for name, level in wanted.items()):
        assert time.monotonic() < deadline, f"{wanted} not reported within {timeout} s"
        time.sleep(0.05)


def _changed(out: str) -> dict[str, int]:
    """The levels a kafka-features run says it set ("X was upgraded to N.", "X was disabled.")."""
    found = {name: int(level) for name, level in CHANGED.findall(out)}
    return found | {name: 0 for name in DISABLED.findall(out)}


def _run(tools: KafkaTools, bootstrap: str) -> tuple[list[Any], list[int]]:
    """(each step as the user sees it, the epochs describe printed)."""
    seen: list[Any] = []
    epochs: list[int] = []
    for step in STEPS:
        if callable(step):
            seen.append((step.__name__, step(bootstrap)))
            continue
        done = tools.run("kafka-features", "--bootstrap-server", bootstrap, *step)
        _applied(bootstrap, _changed(done.out))
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
        _applied(kafka41.bootstrap_servers, {"share.version": 0, "transaction.version": 2, "group.version": 1})
    mine, my_epochs = _run(kafka_tools, fresh.bootstrap_servers)
    assert mine == theirs
    for epochs in (my_epochs, their_epochs):  # each describe follows a change
        assert epochs == sorted(set(epochs)), epochs


def _kafka_python_steps(bootstrap: str) -> list[Any]:
    """kafka-python's KafkaAdminClient (3.x has describe_features and update_features), as a script uses it."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        def described() -> dict[str, Any]:
            return {name: {k: v for k, v in found.items() if k != "finalized_epoch"}
                    for name, found in sorted(admin.describe_features().items())}

        seen: list[Any] = [described(), admin.update_features({"share.version": 1}, validate_only=True),
                           admin.update_features({"share.version": 1})]
        _applied(bootstrap, {"share.version": 1})
        seen.append(described())
        with pytest.raises(kafka.errors.InvalidUpdateVersionError) as refused:
            admin.update_features({"transaction.version": 3})
        seen += [str(refused.value).split("error_message=")[1],
                 admin.update_features({"share.version": ("SAFE_DOWNGRADE", 0)})]
        _applied(bootstrap, {"share.version": 0})
        return seen + [described()]
    finally:
        admin.close()


def test_kafka_python_updates_features_as_on_kafka(fresh: Broker, kafka41: ReferenceKafka) -> None:
    try:
        theirs = _kafka_python_steps(kafka41.bootstrap_servers)
    finally:
        restore = KafkaAdminClient(bootstrap_servers=kafka41.bootstrap_servers)
        restore.update_features({"share.version": ("SAFE_DOWNGRADE", 0)})
        restore.close()
        _applied(kafka41.bootstrap_servers, {"share.version": 0})
    assert _kafka_python_steps(fresh.bootstrap_servers) == theirs


def _listed(bootstrap: str) -> dict[int, tuple[dict[str, tuple[int, int]], dict[str, int]]]:
    out = {}
    with Wire(bootstrap) as wire:
        for version in (3, 4):
            answer = wire.request(18, version, make(request_class(18, version), client_software_name="t",
                                                    client_software_version="1"))
            out[version] = ({f.name: (f.min_version, f.max_version) for f in answer.supported_features},
                            {f.name: f.max_version_level for f in answer.finalized_features})
    return out


def test_api_versions_list_the_features_kafka_lists(fresh: Broker, kafka41: ReferenceKafka) -> None:
    """v3 leaves out ranges starting at 0 (Java clients before 3.9 refuse them); v4 lists them all."""
    assert _listed(fresh.bootstrap_servers) == _listed(kafka41.bootstrap_servers)


def _wire_steps(bootstrap: str) -> list[Any]:
    """UpdateFeatures v0-v2 and UnregisterBroker as a client sees them on the wire (changing nothing)."""
    import kio.schema.update_features.v0.request as v0

    from tests.test_features import update

    with Wire(bootstrap) as wire:
        return [
            update(wire, ("share.version", 1, 1), ("group.version", 1, 1), validate_only=True, version=1),
            update(wire, ("transaction.version", 1, 1), ("share.version", 1, 1), validate_only=True, version=1),
            update(wire, ("transaction.version", 3, 1), ("share.version", 4, 1), validate_only=True, version=1),
            update(wire, ("group.version", 0, 5), validate_only=True),
            update(wire, ("metadata.version", 22, 3), validate_only=True),
            update(wire, ("share.version", -1, 2), validate_only=True),
            wire.request(57, 0, make(v0.UpdateFeaturesRequest, timeout=TIMEOUT, feature_updates=(
                make(v0.FeatureUpdateKey, feature="share.version", max_version_level=0, allow_downgrade=True),))),
            wire.request(57, 0, make(v0.UpdateFeaturesRequest, timeout=TIMEOUT, feature_updates=(
                make(v0.FeatureUpdateKey, feature="transaction.version", max_version_level=1,
                     allow_downgrade=False),))),
            wire.request(64, 0, make(request_class(64, 0), broker_id=77)),
        ]


def test_wire_answers_by_version_are_kafkas(fresh: Broker, kafka41: ReferenceKafka) -> None:
    assert _wire_steps(fresh.bootstrap_servers) == _wire_steps(kafka41.bootstrap_servers)
