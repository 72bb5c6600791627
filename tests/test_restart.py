"""A broker restart in the middle of producing loses nothing acknowledged."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from kafkacompat.testing import Broker
from tests.conftest import create_topic
from tests.test_clients_produce_consume import consume_all


def test_restart_mid_stream_keeps_every_acknowledged_message(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    first = Broker(data_dir=data).start()
    port = first.port
    bootstrap = first.bootstrap_servers
    create_topic(bootstrap, "orders", partitions=3)
    acked: list[bytes] = []
    failed: list[str] = []
    stop = threading.Event()

    def on_delivery(err, msg) -> None:
        if err is None:
            acked.append(msg.value())
        else:
            failed.append(str(err))

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
        "linger.ms": 2, "message.timeout.ms": 60000, "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 200,
    })

    def produce_forever() -> None:
        i = 0
        while not stop.is_set():
            producer.produce("orders", value=b"m%06d" % i, on_delivery=on_delivery)
            producer.poll(0)
            i += 1
            if i % 100 == 0:
                time.sleep(0.005)
        producer.flush(60)

    worker = threading.Thread(target=produce_forever)
    worker.start()
    try:
        deadline = time.monotonic() + 20
        while len(acked) < 2000:
            assert time.monotonic() < deadline, "producer made no progress before the restart"
            time.sleep(0.01)
        first.stop()
        second = Broker(data_dir=data, port=port).start()
        try:
            before = len(acked)
            deadline = time.monotonic() + 30
            while len(acked) < before + 2000:
                assert time.monotonic() < deadline, "producer did not resume after the restart"
                time.sleep(0.01)
        finally:
            stop.set()
            worker.join(90)
        assert not failed, failed[:3]
        stored = consume_all(bootstrap, "orders", 3, len(acked), timeout=30)
        values = [m.value() for m in stored]
        assert set(acked) <= set(values), "an acknowledged message is missing after the restart"
        assert len(values) == len(set(values)), "idempotent producing wrote a duplicate"
        second.stop()
    finally:
        stop.set()
        first.stop()


def test_topics_configs_and_data_survive_a_clean_restart(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with Broker(data_dir=data) as broker:
        create_topic(broker.bootstrap_servers, "kept", partitions=2, configs={"retention.ms": "86400000"})
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for i in range(50):
            producer.produce("kept", value=b"v%d" % i, partition=i % 2)
        assert producer.flush(10) == 0
        topic_id = broker.server.store.get_topic("/default", "kept").topic_id
    assert (Path(data) / "streams").is_dir()
    with Broker(data_dir=data) as broker:
        info = broker.server.store.get_topic("/default", "kept")
        assert info is not None and info.partitions == 2 and info.topic_id == topic_id
        assert info.configs == {"retention.ms": "86400000"}
        got = consume_all(broker.bootstrap_servers, "kept", 2, 50)
        assert sorted(m.value() for m in got) == sorted(b"v%d" % i for i in range(50))


def test_cluster_id_is_kept_by_the_store_across_restarts(tmp_path) -> None:
    """A Kafka-style cluster id, made once per store (a memory store: once per process)."""
    with Broker(data_dir=str(tmp_path)) as first:
        kept = first.server.cluster.cluster_id
    with Broker(data_dir=str(tmp_path)) as again:
        assert again.server.cluster.cluster_id == kept
    with Broker() as memory, Broker() as other:
        assert memory.server.cluster.cluster_id != other.server.cluster.cluster_id
