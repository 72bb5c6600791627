"""share.version: finalized at 1 unless the operator keeps share groups off, and then refused as Kafka refuses them."""

from __future__ import annotations

from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.wire import Wire, request_class


def _share_version(wire: Wire) -> int | None:
    response = wire.request(18, 3, make(request_class(18, 3), client_software_name="wire", client_software_version="1"))
    return {f.name: f.max_version_level for f in response.finalized_features}.get("share.version")


def _join(wire: Wire) -> object:
    return wire.request(76, 1, make(request_class(76, 1), group_id="g", member_id="m1", member_epoch=0, rack_id=None,
                                    subscribed_topic_names=("t",)))


def test_share_groups_are_served_unless_share_version_is_0() -> None:
    with Broker() as broker, Wire(broker.bootstrap_servers) as wire:
        broker.create_topic("t", partitions=2)
        assert _share_version(wire) == 1
        joined = _join(wire)
        assert joined.error_code == ErrorCode.none and joined.member_epoch == 1
        assert [sorted(tp.partitions) for tp in joined.assignment.topic_partitions] == [[0, 1]]
    with Broker(share_version=0) as broker, Wire(broker.bootstrap_servers) as wire:
        assert _share_version(wire) is None  # level 0 is left out, as Kafka leaves it out
        assert _join(wire).error_code == ErrorCode.unsupported_version
