"""ApiVersions: every version answers, unknown versions get the v0 fallback."""

from __future__ import annotations

import struct

import pytest
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.handlers import SUPPORTED
from kafkacompat.testing import Broker
from tests.wire import Wire, request_class


@pytest.mark.parametrize("version", range(0, 5))
def test_every_version_lists_the_served_apis(broker: Broker, version: int) -> None:
    request = make(request_class(18, version), client_software_name="wire", client_software_version="1")
    with Wire(broker.bootstrap_servers) as wire:
        response = wire.request(18, version, request)
    assert response.error_code == ErrorCode.none
    served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert served == SUPPORTED
    assert served[0] == (0, 13)  # librdkafka keeps compressing only when min 0 is advertised; v13 as Kafka 4.1


def test_a_future_version_gets_a_v0_answer_with_error_35(broker: Broker) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        wire.send(18, 9, b"\x00\x00\x00")
        frame = wire.read_frame()
    correlation, error, count = struct.unpack_from(">ihi", frame, 0)
    assert correlation == wire.correlation
    assert error == ErrorCode.unsupported_version.value == 35
    keys = [struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(count)]
    assert (18, 0, 4) in keys


def test_only_implemented_apis_are_advertised(broker: Broker) -> None:
    # Java clients start using what is advertised; only implemented APIs appear.
    assert 71 not in SUPPORTED  # telemetry
    assert SUPPORTED[27] == (1, 1)  # WriteTxnMarkers, as Kafka 4.1 (kafka-transactions.sh abort)
    # Transactions v2 (KIP-890 part 2) is served: EndTxn, TxnOffsetCommit and AddPartitionsToTxn v5, Produce v12.
    assert SUPPORTED[26] == (0, 5) and SUPPORTED[28] == (0, 5) and SUPPORTED[24] == (0, 5)
    assert SUPPORTED[0][1] >= 12


def finalized_transaction_version(bootstrap: str) -> int | None:
    """The transaction.version level a broker's ApiVersions v3 answer finalizes."""
    request = make(request_class(18, 3), client_software_name="wire", client_software_version="1")
    with Wire(bootstrap) as wire:
        response = wire.request(18, 3, request)
    levels = {f.name: f.max_version_level for f in response.finalized_features}
    return levels.get("transaction.version")


def test_transaction_version_is_2_unless_the_operator_keeps_1(broker: Broker) -> None:
    """Java 4.x producers use KIP-890's transactions v2 only when the finalized level is 2."""
    assert finalized_transaction_version(broker.bootstrap_servers) == 2
    with Broker(transaction_version=1) as kept:
        assert finalized_transaction_version(kept.bootstrap_servers) == 1


def test_transaction_version_beyond_2_is_refused() -> None:
    from kafkacompat.config import BrokerConfig, ConfigError, load_config

    with pytest.raises(ConfigError, match="transaction_version must be 1 or 2"):
        load_config(environ={}, overrides={"transaction_version": 3})
    assert BrokerConfig().transaction_version == 2
