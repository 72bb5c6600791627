"""One consumer-group member in its own process, driven by tests/groups/child_members.py.

A separate process lets a test kill a member outright (SIGKILL: no
LeaveGroup, no more heartbeats) as a crashed consumer would. The member
reports what it sees as JSON lines on stdout: "assigned" / "revoked"
partition lists from the client's rebalance callbacks and every "record"
it consumed, after committing it synchronously. SIGTERM closes the
consumer the normal way (LeaveGroup for dynamic members).

    python member_main.py CLIENT BOOTSTRAP TOPIC GROUP [--instance-id ID]
        [--assignor range|cooperative-sticky] [--session-ms N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import threading

stopping = threading.Event()


def emit(event: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def run_confluent(args: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, KafkaException

    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": args.session_ms,
        "heartbeat.interval.ms": max(args.session_ms // 10, 100),
        "partition.assignment.strategy": args.assignor,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    consumer = Consumer(conf)

    def on_assign(_c: object, parts: list) -> None:
        emit("assigned", partitions=sorted(p.partition for p in parts))

    def on_revoke(_c: object, parts: list) -> None:
        emit("revoked", partitions=sorted(p.partition for p in parts))

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    while not stopping.is_set():
        msg = consumer.poll(0.1)
        if msg is None or msg.error():
            continue
        try:
            consumer.commit(message=msg, asynchronous=False)
            committed = True
        except KafkaException:
            committed = False
        emit("record", partition=msg.partition(), offset=msg.offset(), value=msg.value().decode(),
             committed=committed)
    consumer.close()


def run_kafka_python(args: argparse.Namespace) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):  # type: ignore[no-untyped-def]
            emit("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned):  # type: ignore[no-untyped-def]
            emit("assigned", partitions=sorted(tp.partition for tp in assigned))

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_instance_id=args.instance_id or None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=max(args.session_ms // 10, 100),
        metadata_max_age_ms=1000,
    )
    consumer.subscribe([args.topic], listener=Listener())
    while not stopping.is_set():
        for tp, records in consumer.poll(timeout_ms=100).items():
            for rec in records:
                consumer.commit({tp: OffsetAndMetadata(rec.offset + 1, None, -1)})
                emit("record", partition=tp.partition, offset=rec.offset, value=rec.value.decode(),
                     committed=True)
    consumer.close()


async def run_aiokafka(args: argparse.Namespace) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):  # type: ignore[no-untyped-def]
            emit("revoked", partitions=sorted(tp.partition for tp in revoked))

        def on_partitions_assigned(self, assigned):  # type: ignore[no-untyped-def]
            emit("assigned", partitions=sorted(tp.partition for tp in assigned))

    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_instance_id=args.instance_id or None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=max(args.session_ms // 10, 100),
        metadata_max_age_ms=1000,
    )
    consumer.subscribe([args.topic], listener=Listener())
    await consumer.start()
    try:
        while not stopping.is_set():
            batches = await consumer.getmany(timeout_ms=100)
            for tp, records in batches.items():
                for rec in records:
                    await consumer.commit({tp: rec.offset + 1})
                    emit("record", partition=tp.partition, offset=rec.offset, value=rec.value.decode(),
                         committed=True)
    finally:
        await consumer.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("client", choices=["confluent", "kafka-python", "aiokafka"])
    parser.add_argument("bootstrap")
    parser.add_argument("topic")
    parser.add_argument("group")
    parser.add_argument("--instance-id", default="")
    parser.add_argument("--assignor", default="range")
    parser.add_argument("--session-ms", type=int, default=3000)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    if args.client == "confluent":
        run_confluent(args)
    elif args.client == "kafka-python":
        run_kafka_python(args)
    else:
        asyncio.run(run_aiokafka(args))
    emit("closed")


if __name__ == "__main__":
    main()
