"""A broker restarted on damaged files, driven by stock clients (confluent-kafka).

Files are damaged while the broker is stopped, the way a bad disk, an
operator's mistake or a partial restore does. The broker must start, serve
every acknowledged message still intact on disk (checked by librdkafka's own
CRC checks), never give an offset out twice, say in one log line what it
found, and answer KAFKA_STORAGE_ERROR (never an internal error) for what it
cannot serve.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafkacompat.protocol.records import Record, build_batch, iter_records
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.conftest import create_topic
from tests.test_bad_input import produce_request
from tests.test_fetch_and_offsets import fetch_request
from tests.test_idempotence import init_producer_id, send
from tests.wire import Wire

COUNT = 2000
SEGMENT = {"segment.bytes": "16384"}  # several partitionlets for 2,000 small messages


def produce(bootstrap: str, topic: str, count: int, start: int = 0) -> dict[int, bytes]:
    """Idempotent acks=all produce; returns offset -> value of every acknowledged message."""
    acked: dict[int, bytes] = {}
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is None:
            acked[msg.offset()] = msg.value()
        else:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "batch.num.messages": 50, "message.timeout.ms": 20000})
    for i in range(start, start + count):
        producer.produce("orders", value=b"m%06d" % i + b"." * 100, on_delivery=on_delivery)
        if i % 200 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors[:3]
    return acked


def consume_until(bootstrap: str, topic: str, last_offset: int, timeout: float = 20) -> dict[int, bytes]:
    """Read from offset 0 with CRC checks until `last_offset` arrives (or the timeout)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "check.crcs": True, "fetch.error.backoff.ms": 50})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + timeout
    try:
        while last_offset not in got and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got[msg.offset()] = msg.value()
    finally:
        consumer.close()
    return got


def partition_dir(data: Path) -> Path:
    return data / "streams" / "default" / "orders" / "0"


def sealed_log(data: Path) -> Path:
    logs = sorted(partition_dir(data).glob("*.log"))
    return logs[len(logs) // 2]


def flip_mid_batch(path: Path) -> None:
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        byte = f.read(1)[0]
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte ^ 0x80]))


def zero_tail(path: Path) -> None:
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.seek(size - 500)
        f.write(bytes(500))


# case -> (damage(data dir, stale chain.json), the file a log line must name, skip_damaged, may lose a few)
CASES = {
    "manifest-deleted": (lambda d, s: os.unlink(partition_dir(d) / "chain.json"), "chain.json", False, False),
    "manifest-stale": (lambda d, s: shutil.copyfile(s, partition_dir(d) / "chain.json"), "chain.json", False, False),
    "manifest-garbled": (lambda d, s: (partition_dir(d) / "chain.json").write_bytes(b"\x00garbage"), "chain.json",
                         False, False),
    "topics-deleted": (lambda d, s: os.unlink(d / "streams" / "default" / ".topics"), ".topics", False, False),
    "volume-id-changed": (lambda d, s: (d / "volume.id").write_text(uuid.uuid4().hex), "chain.json", False, False),
    "sealed-log-flipped": (lambda d, s: flip_mid_batch(sealed_log(d)), ".log", True, True),
    "active-tail-zeroed": (lambda d, s: zero_tail(sorted(partition_dir(d).glob("*.log"))[-1]), ".log", True, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_restart_on_damaged_files(tmp_path: Path, caplog: pytest.LogCaptureFixture, case: str) -> None:
    damage, named, skip, lossy = CASES[case]
    data = tmp_path / "data"
    first = Broker(data_dir=str(data)).start()
    port = first.port
    try:
        create_topic(first.bootstrap_servers, "orders", 1, SEGMENT)
        acked = produce(first.bootstrap_servers, "orders", COUNT // 4)
        stale = tmp_path / "stale-chain.json"
        shutil.copyfile(partition_dir(data) / "chain.json", stale)  # lists only the first partitionlets
        acked |= produce(first.bootstrap_servers, "orders", COUNT - COUNT // 4, start=COUNT // 4)
    finally:
        first.stop()
    assert len(acked) == COUNT and len(list(partition_dir(data).glob("*.log"))) > 3
    damage(data, stale)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        second = Broker(data_dir=str(data), port=port, skip_damaged=skip).start()
        try:
            more = produce(second.bootstrap_servers, "orders", 10, start=COUNT)
            assert min(more) > max(acked)  # no offset handed out twice
            got = consume_until(second.bootstrap_servers, "orders", max(more))
        finally:
            second.stop()
    assert all(value == (acked | more)[offset] for offset, value in got.items())  # never a wrong message
    assert set(more) <= set(got)
    lost = set(acked) - set(got)
    if lossy:  # only the damaged batch's messages, and they are logged as skipped
        assert 0 < len(lost) < 200
        assert any("skipping damaged offsets" in r.getMessage() for r in caplog.records)
    else:
        assert not lost, f"{len(lost)} acknowledged messages lost"
    assert any(named in r.getMessage() and r.levelno >= logging.WARNING for r in caplog.records)
    assert not any("closing connection" in r.getMessage() or r.exc_info for r in caplog.records)


def test_damaged_range_is_an_error_by_default(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "data"
    first = Broker(data_dir=str(data)).start()
    port = first.port
    try:
        create_topic(first.bootstrap_servers, "orders", 1, SEGMENT)
        acked = produce(first.bootstrap_servers, "orders", COUNT)
    finally:
        first.stop()
    flip_mid_batch(sealed_log(data))
    second = Broker(data_dir=str(data), port=port).start()
    try:
        with Wire(second.bootstrap_servers) as wire:
            answers = []
            offset = 0
            while offset < len(acked):
                part = wire.request(1, 12, fetch_request(12, "orders", offset)).responses[0].partitions[0]
                if part.error_code != ErrorCode.none:
                    answers.append(part.error_code)
                    break
                offset = list(iter_records(part.records))[-1].offset + 1
            assert answers == [ErrorCode.corrupt_message]  # clients hand it to the application
            again = wire.request(1, 12, fetch_request(12, "orders", offset)).responses[0].partitions[0]
            assert again.error_code == ErrorCode.corrupt_message  # every time, not only once
    finally:
        second.stop()
    quarantined = [r for r in caplog.records if "quarantine" in r.getMessage()]
    assert len(quarantined) == 1  # one line for the damage, not one per fetch


def test_unservable_partition_answers_storage_error_and_the_rest_is_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    first = Broker(data_dir=str(data)).start()
    port = first.port
    try:
        create_topic(first.bootstrap_servers, "orders", 2)
        with Wire(first.bootstrap_servers) as wire:
            pid = init_producer_id(wire)
            assert send(wire, "orders", pid, 0) == (ErrorCode.none, 0)
    finally:
        first.stop()
    broken = partition_dir(data)
    shutil.rmtree(broken)
    broken.write_bytes(b"not a directory")  # partition 0 cannot be listed, let alone served
    second = Broker(data_dir=str(data), port=port).start()
    try:
        with Wire(second.bootstrap_servers) as wire:
            pid = init_producer_id(wire)
            for _ in range(50):
                started = time.monotonic()
                assert send(wire, "orders", pid, 0)[0] == ErrorCode.kafka_storage_error
                assert time.monotonic() - started < 2
                part = wire.request(1, 12, fetch_request(12, "orders", 0)).responses[0].partitions[0]
                assert part.error_code == ErrorCode.kafka_storage_error
        producer = Producer({"bootstrap.servers": second.bootstrap_servers, "enable.idempotence": True})
        delivered = []
        producer.produce("orders", b"ok", partition=1, on_delivery=lambda e, m: delivered.append(e))
        assert producer.flush(20) == 0 and delivered == [None]
    finally:
        second.stop()
    offline = [r for r in caplog.records if "cannot be served" in r.getMessage()]
    assert len(offline) == 1 and "orders/0" in offline[0].getMessage()
    assert not any("closing connection" in r.getMessage() or r.exc_info for r in caplog.records)


@pytest.fixture
def small_disk(tmp_path: Path):
    """A real 20 MB filesystem, so the disk fills up for real."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.system(f"mount -t tmpfs -o size=20m tmpfs {mnt} 2>/dev/null") != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield mnt
    os.system(f"umount -l {mnt}")  # lazily: a broker thread that failed may still hold a file


def test_full_disk_answers_storage_error_starts_serves_and_recovers(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = small_disk / "data"
    spare = small_disk / "operator-file"
    spare.write_bytes(bytes(4 << 20))  # room an operator can free later
    broker = Broker(data_dir=str(data)).start()
    port = broker.port
    filled = 0
    try:
        create_topic(broker.bootstrap_servers, "fill", 1)
        create_topic(broker.bootstrap_servers, "orders", 1)
        with Wire(broker.bootstrap_servers) as wire:
            for size in (60_000, 2_000, 10):  # down to the last bytes of the last page
                batch = build_batch([Record(None, b"x" * size, [], 1)])
                for _ in range(2000):
                    started = time.monotonic()
                    part = wire.request(0, 9, produce_request("fill", batch)).responses[0].partition_responses[0]
                    assert time.monotonic() - started < 2
                    if part.error_code != ErrorCode.none:
                        assert part.error_code == ErrorCode.kafka_storage_error
                        break
                    filled += 1
            assert 100 < filled < 3000
            # librdkafka, told not to retry, reports the broker's answer itself (stock clients retry
            # KAFKA_STORAGE_ERROR, which Kafka marks retriable, until their delivery timeout)
            reports = []
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "retries": 0,
                                 "enable.idempotence": False})
            started = time.monotonic()
            producer.produce("orders", b"x" * 5000, on_delivery=lambda e, m: reports.append(e))
            producer.flush(10)
            assert [e.code() for e in reports] == [KafkaError.KAFKA_STORAGE_ERROR]
            assert time.monotonic() - started < 5
            pid = init_producer_id(wire)
            for seq in (0, 0, 0):  # an idempotent acks=all producer retrying: the same prompt answer
                started = time.monotonic()
                assert send(wire, "orders", pid, seq)[0] == ErrorCode.kafka_storage_error
                assert time.monotonic() - started < 2
    finally:
        broker.stop()
    # the broker starts on the full disk, serves what it holds and takes commits
    broker = Broker(data_dir=str(data), port=port).start()
    try:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "readers",
                             "enable.auto.commit": False, "check.crcs": True})
        consumer.assign([TopicPartition("fill", 0, 0)])
        got = 0
        deadline = time.monotonic() + 20
        while got < filled and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got += 1
        assert got == filled
        committed = consumer.commit(offsets=[TopicPartition("fill", 0, filled)], asynchronous=False)
        assert committed[0].error is None
        consumer.close()
        with Wire(broker.bootstrap_servers) as wire:
            pid = init_producer_id(wire)
            assert send(wire, "orders", pid, 0)[0] == ErrorCode.kafka_storage_error
            spare.unlink()  # the operator frees room: writes resume, no restart
            deadline = time.monotonic() + 10
            while (answer := send(wire, "orders", pid, 0))[0] != ErrorCode.none:
                assert answer[0] == ErrorCode.kafka_storage_error and time.monotonic() < deadline
                time.sleep(0.2)
    finally:
        broker.stop()
    failures = [r for r in caplog.records if "append to" in r.getMessage()]
    assert len(failures) <= 4  # one line per partition and minute, not one per request
    assert not any("closing connection" in r.getMessage() or r.exc_info for r in caplog.records)
