"""UpdateFeatures and UnregisterBroker on one broker: levels kept in the store, answers by version,
the behaviour each level switches, and refusals (tests/parity/test_features_parity.py compares the
tools' output with Kafka 4.1's)."""

from __future__ import annotations

import datetime
from typing import Any

import kio.schema.update_features.v0.request as uf0
import kio.schema.update_features.v1.request as uf1
import kio.schema.update_features.v2.request as uf2
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.wire import Wire, request_class

TIMEOUT = datetime.timedelta(seconds=10)
SAFE_DOWNGRADE = 2


def features(wire: Wire) -> tuple[dict[str, int], int]:
    """(finalized levels, epoch) from ApiVersions v4, as the Java clients read them."""
    answer = wire.request(18, 4, make(request_class(18, 4), client_software_name="t", client_software_version="1"))
    return {f.name: f.max_version_level for f in answer.finalized_features}, answer.finalized_features_epoch


def update(wire: Wire, *changes: tuple[str, int, int], validate_only: bool = False, version: int = 2) -> Any:
    """UpdateFeatures with (feature, level, upgrade type) changes."""
    m = uf2 if version == 2 else uf1
    return wire.request(57, version, make(m.UpdateFeaturesRequest, timeout=TIMEOUT, validate_only=validate_only,
                                          feature_updates=tuple(make(m.FeatureUpdateKey, feature=name,
                                                                     max_version_level=level, upgrade_type=kind)
                                                                for name, level, kind in changes)))


def share_heartbeat(wire: Wire) -> ErrorCode:
    return wire.request(76, 1, make(request_class(76, 1), group_id="g", member_id="m1", member_epoch=0, rack_id=None,
                                    subscribed_topic_names=("t",))).error_code


def test_levels_change_at_once_and_survive_a_restart(tmp_path) -> None:
    data = str(tmp_path)
    with Broker(data_dir=data) as broker, Wire(broker.bootstrap_servers) as wire:
        before, epoch = features(wire)
        assert before["transaction.version"] == 2 and before["share.version"] == 1
        answer = update(wire, ("transaction.version", 1, SAFE_DOWNGRADE), ("share.version", 0, SAFE_DOWNGRADE))
        assert (answer.error_code, answer.error_message) == (ErrorCode.none, None)
        after, bumped = features(wire)
        assert after["transaction.version"] == 1 and "share.version" not in after and bumped == epoch + 1
        assert share_heartbeat(wire) == ErrorCode.unsupported_version
    with Broker(data_dir=data) as broker, Wire(broker.bootstrap_servers) as wire:
        assert features(wire) == (after, bumped)
        assert share_heartbeat(wire) == ErrorCode.unsupported_version
        assert update(wire, ("share.version", 1, 1)).error_code == ErrorCode.none
        broker.create_topic("t")
        assert share_heartbeat(wire) == ErrorCode.none


def test_answers_by_version_and_validate_only() -> None:
    with Broker() as broker, Wire(broker.bootstrap_servers) as wire:
        levels, epoch = features(wire)
        checked = update(wire, ("group.version", 0, SAFE_DOWNGRADE), validate_only=True, version=1)
        assert [(r.feature, r.error_code, r.error_message) for r in checked.results] == [
            ("group.version", ErrorCode.none, "NONE")]
        assert features(wire) == (levels, epoch)  # validated only: nothing changed
        refused = update(wire, ("group.version", 0, 1), version=1)  # a downgrade sent as an upgrade
        assert refused.error_code == ErrorCode.invalid_update_version and refused.results == ()
        assert refused.error_message == (
            "The update failed for all features since the following feature had an error: Invalid update version 0 "
            "for feature group.version. Can't downgrade the version of this feature without setting the upgrade "
            "type to either safe or unsafe downgrade.")
        unknown_type = update(wire, ("group.version", 0, 7))
        assert unknown_type.error_message.endswith("The controller does not support the given upgrade type.")
        v0 = wire.request(57, 0, make(uf0.UpdateFeaturesRequest, timeout=TIMEOUT, feature_updates=(
            make(uf0.FeatureUpdateKey, feature="group.version", max_version_level=0, allow_downgrade=True),)))
        assert [(r.feature, r.error_code) for r in v0.results] == [("group.version", ErrorCode.none)]
        assert "group.version" not in features(wire)[0]


def test_group_version_0_refuses_the_consumer_group_protocol() -> None:
    with Broker() as broker, Wire(broker.bootstrap_servers) as wire:
        assert update(wire, ("group.version", 0, SAFE_DOWNGRADE)).error_code == ErrorCode.none
        heartbeat = wire.request(68, 0, make(request_class(68, 0), group_id="g", member_id="", member_epoch=0,
                                             instance_id=None, rack_id=None, rebalance_timeout=TIMEOUT,
                                             subscribed_topic_names=("t",), server_assignor=None,
                                             topic_partitions=()))
        assert heartbeat.error_code == ErrorCode.unsupported_version
        described = wire.request(69, 0, make(request_class(69, 0), group_ids=("g",),
                                             include_authorized_operations=False))
        assert [g.error_code for g in described.groups] == [ErrorCode.unsupported_version]


def test_unregister_answers_for_unknown_ids_and_keeps_this_broker() -> None:
    with Broker() as broker, Wire(broker.bootstrap_servers) as wire:
        unknown = wire.request(64, 0, make(request_class(64, 0), broker_id=7))
        assert (unknown.error_code, unknown.error_message) == (
            ErrorCode.broker_id_not_registered, "Broker ID 7 is not currently registered")
        assert wire.request(64, 0, make(request_class(64, 0), broker_id=broker.config.node_id)).error_code == \
            ErrorCode.none
        broker.create_topic("still-served")  # the broker alone registers again at once


def test_without_alter_on_the_cluster_both_are_refused() -> None:
    with Broker(authorizer=True) as broker, Wire(broker.bootstrap_servers) as wire:
        refused = update(wire, ("share.version", 0, SAFE_DOWNGRADE))
        assert refused.error_code == ErrorCode.cluster_authorization_failed
        assert wire.request(64, 0, make(request_class(64, 0), broker_id=7)).error_code == \
            ErrorCode.cluster_authorization_failed
        assert features(wire)[0]["share.version"] == 1


def test_api_versions_before_v4_leave_out_features_whose_range_starts_at_0(broker: Broker) -> None:
    """Java clients before 3.9 (ApiVersions v3) reject a supported range starting at 0, as Kafka 4.1 knows."""
    with Wire(broker.bootstrap_servers) as wire:
        old = wire.request(18, 3, make(request_class(18, 3), client_software_name="t", client_software_version="1"))
        new = wire.request(18, 4, make(request_class(18, 4), client_software_name="t", client_software_version="1"))
    assert [f.name for f in old.supported_features] == ["metadata.version"]
    assert {f.name for f in new.supported_features} > {"metadata.version", "group.version"}
    assert [(f.name, f.max_version_level) for f in old.finalized_features] == \
        [(f.name, f.max_version_level) for f in new.finalized_features]
