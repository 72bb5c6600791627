"""/metrics as Prometheus scrapes it, after real confluent-kafka traffic."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.errors import ErrorCode
from prometheus_client.parser import text_string_to_metric_families

from kafkacompat.testing import Broker
from tests.test_clients_produce_consume import consume_all
from tests.test_transactions_protocol import add_partitions
from tests.wire import Wire


def scrape(broker: Broker) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, parsed by prometheus_client's own parser: {(name, labels): value}."""
    with urllib.request.urlopen(broker.http_url + "/metrics", timeout=10) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain; version=")
        text = answer.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        assert family.name.startswith("kafkacompat_"), family.name
        for sample in family.samples:
            samples[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def total(samples: dict, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include `labels`."""
    return sum(value for (sample, have), value in samples.items()
               if sample == name and set(labels.items()) <= set(have))


def produce(bootstrap: str, topic: str, values: list[bytes], idempotent: bool = False) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": idempotent})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(15) == 0


def stored_bytes(broker: Broker, topic: str) -> int:
    """Bytes of the record batches the broker stored for partition 0 of `topic`."""
    cluster = broker.server.cluster
    data = broker.call(cluster.store.partition(cluster.default_stream, topic, 0).read(0, 1 << 24))
    return len(data)


def test_counters_rise_by_what_a_producer_and_consumer_did() -> None:
    with Broker(http_port=0) as broker:
        broker.create_topic("orders")
        before = scrape(broker)
        assert total(before, "kafkacompat_messages_in_total") == 0
        values = [b"order-%d" % i for i in range(7)]
        produce(broker.bootstrap_servers, "orders", values, idempotent=True)
        assert [m.value() for m in consume_all(broker.bootstrap_servers, "orders", 1, 7)] == values
        after = scrape(broker)

        assert total(after, "kafkacompat_messages_in_total") == 7
        written = stored_bytes(broker, "orders")
        assert total(after, "kafkacompat_bytes_in_total") == written
        assert total(after, "kafkacompat_bytes_out_total") >= written  # the consumer read every batch
        produces = total(after, "kafkacompat_requests_total", api="Produce")
        assert produces >= 1
        # each answered request is one latency observation of its API
        assert total(after, "kafkacompat_request_latency_seconds_count", api="Produce") == produces
        assert total(after, "kafkacompat_request_latency_seconds_bucket", api="Produce", le="+Inf") == produces
        assert total(after, "kafkacompat_requests_total", api="Fetch") >= 1
        assert total(after, "kafkacompat_requests_total", api="ApiVersions") >= 2  # producer and consumer
        assert total(after, "kafkacompat_request_errors_total") == 0
        # the topic, and __consumer_offsets, made when the consumer's group looked for its coordinator
        assert total(after, "kafkacompat_partitions") == 1 + broker.config.offsets_topic_num_partitions
        assert total(after, "kafkacompat_producer_states") == 1  # one producer id on one partition


def test_a_refused_produce_counts_as_an_error_of_its_code() -> None:
    with Broker(http_port=0) as broker:
        broker.create_topic("small", configs={"max.message.bytes": "1000"})
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "retries": 0})
        failures = []
        producer.produce("small", b"x" * 5000, on_delivery=lambda err, msg: failures.append(err))
        producer.flush(15)
        assert [err.name() for err in failures] == ["MSG_SIZE_TOO_LARGE"]
        samples = scrape(broker)
        assert total(samples, "kafkacompat_request_errors_total", api="Produce", error="MESSAGE_TOO_LARGE") == 1
        assert total(samples, "kafkacompat_messages_in_total") == 0


def test_open_connections_and_volume_free_bytes(tmp_path) -> None:
    with Broker(data_dir=str(tmp_path), http_port=0) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce("anything", b"v")
        assert producer.flush(15) == 0
        samples = scrape(broker)
        assert total(samples, "kafkacompat_open_connections") >= 1
        [free] = [value for (name, labels), value in samples.items()
                  if name == "kafkacompat_volume_free_bytes" and labels == (("volume", str(tmp_path)),)]
        assert free > 0


def test_per_topic_series_are_opt_in_and_capped() -> None:
    with Broker(http_port=0) as broker:
        produce(broker.bootstrap_servers, "plain", [b"a"])
        assert not [key for key in scrape(broker) if key[0].startswith("kafkacompat_topic_")]
    with Broker(http_port=0, metrics_topic_series=1) as broker:
        produce(broker.bootstrap_servers, "first", [b"a", b"b"])
        produce(broker.bootstrap_servers, "second", [b"c"])
        produce(broker.bootstrap_servers, "third", [b"d"])
        samples = scrape(broker)
        assert total(samples, "kafkacompat_topic_messages_in_total", topic="first") == 2
        assert total(samples, "kafkacompat_topic_messages_in_total", topic="_other") == 2
        assert {dict(labels)["topic"] for name, labels in samples if name == "kafkacompat_topic_messages_in_total"} \
            == {"first", "_other"}


def test_two_brokers_in_one_process_keep_their_own_figures() -> None:
    with Broker(http_port=0) as one, Broker(http_port=0) as two:
        produce(one.bootstrap_servers, "t", [b"1", b"2", b"3"])
        produce(two.bootstrap_servers, "t", [b"1"])
        assert total(scrape(one), "kafkacompat_messages_in_total") == 3
        assert total(scrape(two), "kafkacompat_messages_in_total") == 1


@pytest.mark.parametrize("method, path, status", [("GET", "/nope", 404), ("POST", "/metrics", 405)])
def test_bad_paths_and_methods_answer_json(method: str, path: str, status: int) -> None:
    with Broker(http_port=0) as broker:
        request = urllib.request.Request(broker.http_url + path, method=method, data=b"" if method == "POST" else None)
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=10)
        assert caught.value.code == status
        assert caught.value.headers["Content-Type"].startswith("application/json")
        assert json.loads(caught.value.read())["error_code"] == status


def test_no_http_server_unless_asked() -> None:
    with Broker() as broker:
        assert broker.http_port is None
        with pytest.raises(RuntimeError, match="http_port=0"):
            broker.http_url


def test_errors_of_other_apis_are_counted_from_their_answers() -> None:
    with Broker(http_port=0) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("twice", 1)])["twice"].result(15)
        with pytest.raises(KafkaException) as caught:
            admin.create_topics([NewTopic("twice", 1)])["twice"].result(15)
        assert caught.value.args[0].name() == "TOPIC_ALREADY_EXISTS"
        samples = scrape(broker)
        assert total(samples, "kafkacompat_request_errors_total", api="CreateTopics",
                     error="TOPIC_ALREADY_EXISTS") == 1
        assert total(samples, "kafkacompat_requests_total", api="CreateTopics") == 2


def test_errors_answered_per_partition_under_another_field_name_are_counted() -> None:
    """AddPartitionsToTxn answers each partition's error in partition_error_code, not error_code."""
    with Broker(http_port=0) as broker:
        broker.create_topic("txn")
        with Wire(broker.bootstrap_servers) as wire:
            codes = add_partitions(wire, "never-initialized", 4242, 0, "txn", partitions=(0,))
        assert codes != [ErrorCode.none]
        samples = scrape(broker)
        assert total(samples, "kafkacompat_request_errors_total", api="AddPartitionsToTxn",
                     error=codes[0].name.upper()) == 1
