"""A produce whose client hung up before the broker got to it is not stored (issue 28, plain duplicates).

Seen in the cloud chaos campaign: a broker paused (SIGSTOP) past librdkafka's
request timeout still had the producer's requests in its socket buffer.
librdkafka gave up on them, closed the connection and resent the records
elsewhere; the broker, once running again, read the buffered requests and
stored them as well (after waiting for leadership to come back). An acks=1
producer without idempotence then had every such record twice: 1.9% of its
sends in a 10-minute run. Its answer can reach nobody, so the broker does
not place the batch: the client resends it on its next connection.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkacompat.testing.ports import free_port
from tests.test_durability_faults import Served

TOPIC = "gone"


def produce(producer: Producer, value: bytes) -> str | None:
    """Send one record and wait for its delivery report: None, or the error."""
    outcome: list[str | None] = []
    producer.produce(TOPIC, value, partition=0,
                     on_delivery=lambda err, _msg: outcome.append(None if err is None else str(err)))
    deadline = time.monotonic() + 30
    while not outcome and time.monotonic() < deadline:
        producer.poll(0.1)
    assert outcome, "no delivery report within 30 s"
    return outcome[0]


CLOSING = {"04", "05"}  # the client's side after its close: FIN_WAIT1 (its FIN not yet taken), FIN_WAIT2


def wait_for_hang_up(port: int) -> None:
    """Wait until the client has closed a connection to the (paused) broker's port.

    librdkafka reports the give-up before its thread closes the connection; a broker woken in
    between finds an open connection and rightly stores the request. So the test waits until the
    kernel's table shows the close: the broker's side in CLOSE_WAIT, or, where the client's FIN is
    still queued behind requests the broker has no room for, the client's side in FIN_WAIT1."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in Path(table).read_text().splitlines()[1:]:
                local, remote, state = line.split()[1:4]
                if (port_of(local) == port and state == "08") or (port_of(remote) == port and state in CLOSING):
                    return
        time.sleep(0.02)
    raise AssertionError(f"no connection to port {port} was closed by its client within 10 s")


def port_of(address: str) -> int:
    """The port of an address in /proc/net/tcp's hexadecimal form."""
    return int(address.rsplit(":", 1)[1], 16)


def values_until(bootstrap: str, last: bytes) -> list[bytes]:
    """Every value of the partition, read until `last` is seen."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen: list[bytes] = []
    try:
        deadline = time.monotonic() + 20
        while last not in seen and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                seen.append(message.value())
    finally:
        consumer.close()
    assert last in seen, f"{last!r} never read; read {seen}"
    return seen


def test_produce_left_behind_by_its_client_is_not_stored(tmp_path: Path) -> None:
    served = Served(tmp_path / "data", free_port()).start()
    try:  # acks=1, no idempotence, no retries: a request not answered within a second is given up
        producer = Producer({"bootstrap.servers": served.bootstrap, "acks": "1", "enable.idempotence": False,
                             "request.timeout.ms": 1000, "message.timeout.ms": 2000, "retries": 0})
        assert produce(producer, b"first") is None  # connected: the next request goes out at once
        served.proc.send_signal(signal.SIGSTOP)
        try:  # the request waits in the paused broker's socket; librdkafka times out, disconnects, gives up
            error = produce(producer, b"given-up")
            wait_for_hang_up(served.port)
        finally:
            served.proc.send_signal(signal.SIGCONT)
        assert error is not None, "the record was delivered while the broker was paused"
        assert produce(producer, b"after") is None
        producer.flush(10)
        values = values_until(served.bootstrap, b"after")
        assert b"given-up" not in values, f"the producer was told it failed, yet it is stored: {values}"
        assert values == [b"first", b"after"]
    finally:
        served.stop()


def test_requests_left_behind_behind_one_another_are_none_of_them_stored(tmp_path: Path) -> None:
    """Several large requests wait in the paused broker's socket when the client gives up. Reading the
    first, the broker still had the others' bytes before the close in its socket, so a look at what comes
    next found data, not the close, and every request but the last was stored (the cloud campaign's
    plain producer had records stored two and three times after a pause). The connection's TCP state
    tells the close whatever is still unread."""
    served = Served(tmp_path / "data", free_port()).start()
    try:
        producer = Producer({"bootstrap.servers": served.bootstrap, "acks": "1", "enable.idempotence": False,
                             "request.timeout.ms": 1000, "message.timeout.ms": 2000, "retries": 0,
                             "linger.ms": 0, "batch.size": 400_000})
        assert produce(producer, b"first") is None
        served.proc.send_signal(signal.SIGSTOP)
        outcomes: list[str | None] = []
        try:
            for n in range(3):  # a request each (one batch each), all sent before the first times out
                producer.produce(TOPIC, b"given-up-%d-" % n + b"x" * 300_000, partition=0,
                                 on_delivery=lambda err, _msg: outcomes.append(None if err is None else str(err)))
            deadline = time.monotonic() + 30
            while len(outcomes) < 3 and time.monotonic() < deadline:
                producer.poll(0.1)
            wait_for_hang_up(served.port)
        finally:
            served.proc.send_signal(signal.SIGCONT)
        assert len(outcomes) == 3 and None not in outcomes, outcomes
        assert produce(producer, b"after") is None
        values = values_until(served.bootstrap, b"after")
        assert [v[:12] for v in values] == [b"first", b"after"], f"given up, yet stored: {[v[:12] for v in values]}"
    finally:
        served.stop()
