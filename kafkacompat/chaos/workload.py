"""The campaign's clients: stock librdkafka (confluent-kafka) producers and consumers, used as users use them.

Three producers write at once: an idempotent acks=all one and a plain
acks=1 one to topic A, a transactional one to topic T that commits most
transactions and aborts some. Two members of a consumer group read both
topics (read_committed, librdkafka's default) and commit what they have read;
a read_committed reader follows every partition by assignment; an observer
reads the group's committed offsets back. Every send, acknowledgement, read
and commit goes to the history. Each value is `producer|seq|padding`, unique
in the run, so the checker can tell where every record went.

Clients are never restarted by the campaign: librdkafka reconnects by itself
after the broker comes back, as it would for a user. Only a fatal error (an
idempotent producer fenced or out of sequence) makes a new producer, under a
new name, so its sequence numbers start afresh; so does a transaction whose
outcome stays unknown (its commit or abort timed out), as librdkafka then
refuses every new transaction until that one ends.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from .history import History

TOPIC_A = "chaos..a"  # /chaos:a in its Kafka-legal spelling
TOPIC_T = "chaos..t"
PARTITIONS = {TOPIC_A: 3, TOPIC_T: 2}
GROUP = "chaos-group"
SESSION_TIMEOUT_MS = 6000  # the broker's smallest; the nemesis pauses longer than this
PADDING = "x" * 40
NOISE = (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)  # every fault causes these: not worth a history line
CLIENT_LOG = logging.getLogger("kafkacompat.chaos.clients")  # librdkafka's own log lines (campaign: clients.log)
COMMON = {"socket.connection.setup.timeout.ms": 5000, "reconnect.backoff.max.ms": 1000,
          "topic.metadata.refresh.interval.ms": 5000, "logger": CLIENT_LOG}


def value_of(producer: str, seq: int) -> str:
    return f"{producer}|{seq}|{PADDING}"


class Role(threading.Thread):
    """One client in a thread of its own, until `stopping` is set."""

    def __init__(self, name: str, bootstrap: str, history: History, stopping: threading.Event) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.role, self.bootstrap, self.history, self.stopping = name, bootstrap, history, stopping
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # noqa: BLE001 - reported by the campaign, never lost in a thread
            self.failure = exc
            self.history.record("client-crash", role=self.role, error=repr(exc))

    def work(self) -> None:
        raise NotImplementedError

    def client_error(self, err: KafkaError) -> None:
        if err.code() not in NOISE:
            self.history.record("client-error", role=self.role, error=str(err), fatal=err.fatal())


class Writer(Role):
    """A plain (acks=1) or idempotent (acks=all) producer sending at `rate` records a second."""

    def __init__(self, name: str, kind: str, bootstrap: str, history: History, stopping: threading.Event,
                 rng: random.Random, rate: float) -> None:
        super().__init__(name, bootstrap, history, stopping)
        self.kind, self.rng, self.rate = kind, rng, rate
        self.generation = 0
        self.fatal = threading.Event()

    def config(self) -> dict[str, Any]:
        idempotent = self.kind == "idempotent"
        return {**COMMON, "bootstrap.servers": self.bootstrap, "enable.idempotence": idempotent,
                "acks": "all" if idempotent else "1", "linger.ms": self.rng.choice([0, 5, 20]),
                "message.timeout.ms": 120_000, "error_cb": self.on_error}

    def on_error(self, err: KafkaError) -> None:
        self.client_error(err)
        if err.fatal():
            self.fatal.set()

    def work(self) -> None:
        while not self.stopping.is_set():
            name = f"{self.role}.{self.generation}"
            producer = Producer(self.config())
            self.fatal.clear()
            seq = 0
            try:
                while not self.stopping.is_set() and not self.fatal.is_set():
                    self.send(producer, name, seq)
                    seq += 1
                    self.stopping.wait(self.rng.expovariate(self.rate))
                left = drain(producer, 60) if not self.fatal.is_set() else abandon(producer)
            except KafkaException as exc:  # a fatal error raised by poll or flush: a new producer, as a user would
                self.history.record("client-error", role=self.role, error=str(exc.args[0]), fatal=True)
                left = abandon(producer)
            self.history.record("producer-closed", producer=name, undelivered=left)
            self.generation += 1

    def send(self, producer: Producer, name: str, seq: int) -> None:
        partition = seq % PARTITIONS[TOPIC_A]
        value = value_of(name, seq)
        while True:
            try:
                producer.produce(TOPIC_A, value.encode(), key=f"{name}|{seq}".encode(), partition=partition,
                                 headers=[("seq", str(seq).encode())], on_delivery=self.on_delivery(name, seq))
                break
            except BufferError:  # the queue is full (the broker is down): wait for room, not past a stop
                if self.stopping.is_set():
                    return
                producer.poll(0.2)
            except KafkaException:  # the producer hit a fatal error: error_cb (served by poll) says which
                producer.poll(0)
                self.fatal.set()
                return
        self.history.record("send", producer=name, kind=self.kind, seq=seq, topic=TOPIC_A, partition=partition,
                            value=value)
        producer.poll(0)

    def on_delivery(self, name: str, seq: int) -> Callable[[KafkaError | None, Any], None]:
        def report(err: KafkaError | None, msg: Any) -> None:
            record_delivery(self.history, name, self.kind, seq, err, msg)
        return report


def drain(producer: Producer, timeout: float) -> int:
    """What flush(timeout) does, by polls; how many records are left. A fatal error arriving inside flush is
    raised from confluent-kafka's error callback, but librdkafka's flush loop goes on serving delivery
    reports, whose callbacks then run with that exception pending: the history lock one of them took was
    never released, and every client thread waited on it for good (the campaign's hang). poll returns at once
    with the exception, before any other callback."""
    deadline = time.monotonic() + timeout
    while len(producer) and (left := deadline - time.monotonic()) > 0:
        producer.poll(min(left, 0.5))
    return len(producer)


def abandon(producer: Producer) -> int:
    """A producer after a fatal error: the records it still holds, queued or in flight, are failed at once
    (librdkafka's purge), and their reports served, so each becomes a `send-failed` (promised nothing, as
    any failed send) instead of waiting out message.timeout.ms in a producer that will never send again.
    How many it held."""
    held = len(producer)
    try:
        producer.purge(in_queue=True, in_flight=True, blocking=False)
        producer.poll(0)
    except KafkaException:  # the fatal error raised again while its reports were served: they were
        pass
    return held


def record_delivery(history: History, name: str, kind: str, seq: int, err: KafkaError | None, msg: Any,
                    **extra: Any) -> None:
    if err is None:
        history.record("ack", producer=name, kind=kind, seq=seq, topic=msg.topic(), partition=msg.partition(),
                       offset=msg.offset(), value=msg.value().decode(), **extra)
    else:
        history.record("send-failed", producer=name, kind=kind, seq=seq, value=msg.value().decode(),
                       error=str(err), **extra)


class TransactionalWriter(Role):
    """A transactional producer: transactions of 1-8 records to topic T, a quarter of them aborted."""

    def __init__(self, bootstrap: str, history: History, stopping: threading.Event, rng: random.Random,
                 rate: float) -> None:
        super().__init__("txn", bootstrap, history, stopping)
        self.rng, self.rate = rng, rate
        self.partitions = tuple(range(PARTITIONS[TOPIC_T]))
        self.generation = 0

    def work(self) -> None:
        while not self.stopping.is_set():
            name = f"txn.{self.generation}"
            producer = Producer({**COMMON, "bootstrap.servers": self.bootstrap, "transactional.id": "chaos-txn",
                                 "transaction.timeout.ms": 15_000, "message.timeout.ms": 14_000,
                                 "linger.ms": 5, "error_cb": self.client_error})
            if self.session(producer, name):
                return
            self.generation += 1

    def session(self, producer: Producer, name: str) -> bool:
        """Transactions until stopped (True) or until the producer cannot go on (False)."""
        try:
            producer.init_transactions(30)
        except KafkaException as exc:
            self.history.record("client-error", role=self.role, error=str(exc), fatal=True)
            return self.stopping.wait(1)
        seq, txn = 0, 0
        while not self.stopping.is_set():
            txn += 1
            values, commit = [], self.rng.random() >= 0.25
            try:
                producer.begin_transaction()
                for _ in range(self.rng.randint(1, 8)):
                    values.append(self.send(producer, name, seq, txn))
                    seq += 1
                    self.stopping.wait(self.rng.expovariate(self.rate))
                outcome = self.finish(producer, commit)
            except KafkaException as exc:
                outcome = self.recover(producer, exc)
            self.history.record("txn", producer=name, txn=txn, outcome=outcome, values=values)
            if outcome in ("fatal", "unknown"):  # unknown: an abort or commit left in progress makes every
                return False  # begin_transaction _CONFLICT at once; a new producer fences this one and goes on
        return True

    def send(self, producer: Producer, name: str, seq: int, txn: int) -> str:
        partition = self.partitions[seq % len(self.partitions)]
        value = value_of(name, seq)

        def report(err: KafkaError | None, msg: Any) -> None:
            record_delivery(self.history, name, "txn", seq, err, msg, txn=txn)

        producer.produce(TOPIC_T, value.encode(), partition=partition, on_delivery=report)
        self.history.record("send", producer=name, kind="txn", seq=seq, topic=TOPIC_T, partition=partition,
                            value=value, txn=txn)
        producer.poll(0)
        return value

    def finish(self, producer: Producer, commit: bool) -> str:
        if commit:  # commit_transaction flushes inside: its delivery reports are served by polls first (drain)
            drain(producer, 10)
        for _ in range(3):  # a retriable error may be retried, as librdkafka's documentation says
            try:
                (producer.commit_transaction if commit else producer.abort_transaction)(10)
                return "committed" if commit else "aborted"
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise
        return "unknown"

    def recover(self, producer: Producer, exc: KafkaException) -> str:
        err: KafkaError = exc.args[0]
        self.history.record("client-error", role=self.role, error=str(err), fatal=err.fatal())
        if err.txn_requires_abort():
            try:
                producer.abort_transaction(10)
                return "aborted"
            except KafkaException:
                return "fatal"
        return "fatal" if err.fatal() else "unknown"


class Reader(Role):
    """A consumer: a group member that commits what it read, or a reader assigned every partition."""

    def __init__(self, name: str, bootstrap: str, history: History, stopping: threading.Event,
                 group: str | None) -> None:
        super().__init__(name, bootstrap, history, stopping)
        self.group = group

    def work(self) -> None:
        consumer = Consumer({**COMMON, "bootstrap.servers": self.bootstrap, "group.id": self.group or f"{self.role}-x",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "isolation.level": "read_committed", "session.timeout.ms": SESSION_TIMEOUT_MS,
                             "heartbeat.interval.ms": 1000, "check.crcs": True, "error_cb": self.client_error})
        if self.group:
            consumer.subscribe(list(PARTITIONS))
        else:
            consumer.assign([TopicPartition(t, p, 0) for t, n in PARTITIONS.items() for p in range(n)])
        last_commit, unread = time.monotonic(), 0
        try:
            while not self.stopping.is_set():
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    self.history.record("read", reader=self.role, isolation="read_committed", topic=msg.topic(),
                                        partition=msg.partition(), offset=msg.offset(), value=msg.value().decode())
                    unread += 1
                elif msg is not None:
                    self.read_error(consumer, msg)
                if self.group and unread and (unread >= 50 or time.monotonic() - last_commit > 1):
                    self.commit(consumer)
                    last_commit, unread = time.monotonic(), 0
        finally:
            consumer.close()

    def read_error(self, consumer: Consumer, msg: Any) -> None:
        """An error event from poll: recorded; at a damaged range (CORRUPT_MESSAGE, librdkafka's INVALID_MSG)
        the partition is paused, as an application that was told and has no offset to seek to would."""
        err: KafkaError = msg.error()
        if err.code() in NOISE or msg.topic() is None:
            return
        self.history.record("read-error", reader=self.role, topic=msg.topic(), partition=msg.partition(),
                            offset=msg.offset(), code=err.name(), error=err.str())
        if err.code() == KafkaError.INVALID_MSG:
            consumer.pause([TopicPartition(msg.topic(), msg.partition())])

    def commit(self, consumer: Consumer) -> None:
        try:
            done = consumer.commit(asynchronous=False)
        except KafkaException as exc:
            self.history.record("commit-failed", group=self.group, member=self.role, error=str(exc.args[0]))
            return
        for tp in done or []:
            if tp.error is None and tp.offset >= 0:
                self.history.record("commit", group=self.group, member=self.role, topic=tp.topic,
                                    partition=tp.partition, offset=tp.offset)


class CommitObserver(Role):
    """Reads the group's committed offsets back every second (OffsetFetch, without joining the group)."""

    def work(self) -> None:
        consumer = Consumer({**COMMON, "bootstrap.servers": self.bootstrap, "group.id": GROUP,
                             "enable.auto.commit": False, "error_cb": self.client_error})
        tps = [TopicPartition(t, p) for t, n in PARTITIONS.items() for p in range(n)]
        try:
            while not self.stopping.wait(1):
                asked_at = self.history.now()
                try:
                    answer = consumer.committed(tps, timeout=10)
                except KafkaException:
                    continue
                for tp in answer:
                    if tp.error is None and tp.offset >= 0:
                        self.history.record("committed", group=GROUP, topic=tp.topic, partition=tp.partition,
                                            offset=tp.offset, asked_at=asked_at)
        finally:
            consumer.close()


class Workload:
    """Every role of the workload, started and stopped together."""

    def __init__(self, bootstrap: str, history: History, rng: random.Random, rate: float = 30) -> None:
        self.history = history
        self.producing, self.consuming = threading.Event(), threading.Event()
        self.producers: list[Role] = [
            Writer("idem", "idempotent", bootstrap, history, self.producing, random.Random(rng.random()), rate),
            Writer("plain", "plain", bootstrap, history, self.producing, random.Random(rng.random()), rate),
            TransactionalWriter(bootstrap, history, self.producing, random.Random(rng.random()), rate),
        ]
        self.consumers: list[Role] = [
            Reader("member-1", bootstrap, history, self.consuming, GROUP),
            Reader("member-2", bootstrap, history, self.consuming, GROUP),
            Reader("rc-reader", bootstrap, history, self.consuming, None),
            CommitObserver("observer", bootstrap, history, self.consuming),
        ]

    def start(self) -> None:
        for role in self.producers + self.consumers:
            role.start()

    def stop(self, timeout: float = 120) -> list[str]:
        """Producers first (they flush what they hold), then consumers; the names of roles that did not end."""
        deadline = time.monotonic() + timeout
        stuck = []
        for event, roles in ((self.producing, self.producers), (self.consuming, self.consumers)):
            if event is self.consuming:
                self.history.record("campaign", consumers_stopping=True)
            event.set()
            for role in roles:
                role.join(max(0.1, deadline - time.monotonic()))
                if role.is_alive():
                    stuck.append(role.role)
        return stuck


def final_read(bootstrap: str, history: History, timeout: float = 60, event: str = "final",
               tag: dict[str, Any] | None = None) -> None:
    """Read every partition from its start to its end, both isolation levels, into `event` events (each with the
    fields of `tag`: the replication engine names the cluster read)."""
    for isolation in ("read_uncommitted", "read_committed"):
        for topic, count in PARTITIONS.items():
            for partition in range(count):
                read_partition(bootstrap, history, TopicPartition(topic, partition, 0), isolation, timeout, event, tag)


def details(msg: Any) -> dict[str, Any]:
    """A record's key, headers (values in hex) and timestamp, as a consumer sees them."""
    key, headers = msg.key(), msg.headers() or []
    return {"key": key.decode(errors="backslashreplace") if key is not None else None,
            "headers": [[name, value.hex() if value is not None else None] for name, value in headers],
            "timestamp": list(msg.timestamp())}


def high_watermark(consumer: Consumer, tp: TopicPartition, deadline: float) -> int:
    """The partition's high watermark, asked again while its leader is not known yet (a cluster just started)."""
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=5)[1]
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def read_partition(bootstrap: str, history: History, tp: TopicPartition, isolation: str, timeout: float,
                   event: str = "final", tag: dict[str, Any] | None = None) -> None:
    """Read one partition to its end into `event` events (with each record's key, headers and timestamp, which
    the replication engine compares between clusters) and one `{event}-end`. It gives up after `timeout`
    seconds without a record: a long backlog read from the object store takes as long as it takes."""
    consumer = Consumer({**COMMON, "bootstrap.servers": bootstrap, "group.id": "chaos-final",
                         "enable.auto.commit": False, "isolation.level": isolation, "check.crcs": True,
                         "enable.partition.eof": True})
    consumer.assign([tp])
    end, complete = 0, False
    deadline = time.monotonic() + timeout
    try:
        high = high_watermark(consumer, tp, deadline)
        while time.monotonic() < deadline and not complete:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is None:
                history.record(event, reader=event, isolation=isolation, topic=tp.topic, partition=tp.partition,
                               offset=msg.offset(), value=msg.value().decode(), **details(msg), **(tag or {}))
                end = msg.offset() + 1
                deadline = time.monotonic() + timeout
            elif msg.error().code() == KafkaError._PARTITION_EOF:
                end = max(end, msg.offset())
                complete = end >= high or isolation == "read_committed"  # that one ends at the stable offset
    except KafkaException as exc:
        history.record("client-error", role="final", error=str(exc.args[0]), fatal=False)
    finally:
        consumer.close()
    history.record(f"{event}-end", topic=tp.topic, partition=tp.partition, isolation=isolation, end=end,
                   complete=complete, **(tag or {}))
