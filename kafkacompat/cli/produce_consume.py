"""`kafkacompat produce` and `kafkacompat consume`: messages on the command line, over Kafka's protocol.

Like kafka-console-producer/consumer and `rpk topic produce/consume`:
produce sends one message per line of stdin; consume prints one value per
line, or what --format or --json asks for. Both work against any Kafka
broker (see admin/kafka_client.py for the client library and why).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any, BinaryIO

from ..admin.client import BrokerUnreachable
from ..admin.groupless import GrouplessConsumer  # without --group: no consumer group, not even a hidden one
from ..admin.kafka_client import REQUEST_TIMEOUT_S, CommandError, client_config, describe_error
from ..admin.output import count_of, fail
from .arg_types import count, name_value, number_at_least, parsed, partition_number
from .options import add_bootstrap

COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS = ("all", "-1", "0", "1")
DEFAULT_FORMAT = r"%v\n"
_COMMIT_INTERVAL_S = 5.0  # like the console consumer's auto.commit.interval.ms
TOPIC_CREATION_WAIT_S = 5.0  # how long produce waits for a topic the broker is auto-creating
_DIRECTIVE = re.compile(r"%(.)|\\(.)", re.DOTALL)
_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", "0": b"\0"}
FORMAT_HELP = (
    "how to print each message: %%t topic, %%k key, %%v value, %%h headers (k:v,k2:v2), %%p partition, "
    "%%o offset, %%d timestamp (ms), %%%% a percent sign; \\n, \\t escapes (default '%%v\\n', as rpk)"
)


# produce ----------------------------------------------------------------------------------


def _separator(text: str) -> bytes:
    if not text:
        raise argparse.ArgumentTypeError("the key separator may not be empty")
    return text.encode()


def _produce(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException, Producer

    headers = [(name, value.encode()) for name, value in args.header or []]
    try:
        producer = Producer(client_config(args.bootstrap_server, args.command_config, **{
            "acks": args.acks, "compression.type": args.compression, "linger.ms": 5,
            "message.timeout.ms": int(REQUEST_TIMEOUT_S * 1000),
        }))
        _check_partition(producer, args.topic, args.partition, wait_for_creation=True)
    except (CommandError, BrokerUnreachable, KafkaException) as exc:
        return _fail(exc, args)
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(describe_error(err))

    sent = 0
    problem: str | None = None
    try:
        for number, line in enumerate(sys.stdin.buffer, 1):
            line = line.rstrip(b"\n").removesuffix(b"\r")
            key = None
            if args.key_separator is not None:
                key, sep, line = line.partition(args.key_separator)
                if not sep:
                    problem = (f"line {number} has no key separator {args.key_separator.decode()!r}; "
                               f"{count_of(sent, 'earlier message')} {'was' if sent == 1 else 'were'} sent")
                    break
            _send(producer, args, key, line, headers, delivered)
            sent += 1
    except KeyboardInterrupt:  # Ctrl-C ends typed input as Ctrl-D does: what was typed is still delivered
        pass
    remaining = producer.flush(REQUEST_TIMEOUT_S)
    if remaining:
        failures.append(f"{count_of(remaining, 'message')} still unsent after {REQUEST_TIMEOUT_S:g}s")
    if failures:
        return _fail(f"{len(failures)} of {count_of(sent, 'message')} not delivered to {args.topic}: {failures[0]}",
                     args)
    return _fail(problem, args) if problem else 0


def _send(producer: Any, args: argparse.Namespace, key: bytes | None, value: bytes,
          headers: list[tuple[str, bytes]], delivered: Callable[[Any, Any], None]) -> None:
    extra = {} if args.partition is None else {"partition": args.partition}
    while True:
        try:
            producer.produce(args.topic, value, key, headers=headers or None, on_delivery=delivered, **extra)
            producer.poll(0)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.1)


def _check_partition(client: Any, topic: str, partition: int | None, wait_for_creation: bool = False) -> int:
    """The topic's partition count; CommandError if it is unusable.

    A producer's metadata request creates a missing topic where the broker
    auto-creates topics; Apache Kafka answers it UNKNOWN_TOPIC_OR_PARTITION
    until the creation completes, so the producer asks again for a few seconds.
    """
    deadline = time.monotonic() + (TOPIC_CREATION_WAIT_S if wait_for_creation else 0)
    while True:
        metadata = client.list_topics(topic, timeout=REQUEST_TIMEOUT_S).topics.get(topic)
        if metadata is not None and metadata.error is None and metadata.partitions:
            break
        if time.monotonic() >= deadline:
            why = describe_error(metadata.error) if metadata is not None and metadata.error else "no partitions"
            raise CommandError(f"topic {topic} is not available ({why})")
        time.sleep(0.2)
    count = len(metadata.partitions)
    if partition is not None and partition >= count:
        raise CommandError(f"topic {topic} has {count_of(count, 'partition')}: there is no partition {partition}")
    return count


# consume ----------------------------------------------------------------------------------


def compile_format(text: str) -> Callable[[Any], bytes]:
    """A --format string as a function from a message to the bytes to print; ValueError for unknown directives."""
    parts: list[bytes | str] = []
    pos = 0
    for match in _DIRECTIVE.finditer(text):
        parts.append(text[pos:match.start()].encode())
        pos = match.end()
        directive, escape = match.group(1), match.group(2)
        if directive is not None:
            if directive == "%":
                parts.append(b"%")
            elif directive in "tkvhpod":
                parts.append(directive)
            else:
                raise ValueError(f"unknown directive %{directive} in the format (use %t %k %v %h %p %o %d %%)")
        elif escape in _ESCAPES:
            parts.append(_ESCAPES[escape])
        else:
            parts.append(match.group().encode())
    parts.append(text[pos:].encode())

    def render(msg: Any) -> bytes:
        return b"".join(p if isinstance(p, bytes) else _field(msg, p) for p in parts)

    return render


def _null(data: bytes | None) -> bytes:
    return b"null" if data is None else data  # as kafka-console-consumer prints a missing key or value


def _field(msg: Any, name: str) -> bytes:
    if name == "k":
        return _null(msg.key())
    if name == "v":
        return _null(msg.value())
    if name == "t":
        return msg.topic().encode()
    if name == "p":
        return str(msg.partition()).encode()
    if name == "o":
        return str(msg.offset()).encode()
    if name == "d":
        return str(msg.timestamp()[1]).encode()
    return b",".join(k.encode() + b":" + _null(v) for k, v in msg.headers() or [])


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="backslashreplace")


def as_json(msg: Any) -> bytes:
    """One message as one JSON line, with rpk's field names."""
    return json.dumps({
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": msg.timestamp()[1],
        "key": _text(msg.key()),
        "value": _text(msg.value()),
        "headers": [{"key": k, "value": _text(v)} for k, v in msg.headers() or []],
    }).encode() + b"\n"


def _format(text: str) -> Callable[[Any], bytes]:
    return parsed(compile_format, text)


def _offset(text: str) -> int | str:
    if text in ("earliest", "latest"):
        return text
    return number_at_least(text, int, 0, "is not an offset: use a number, earliest or latest",
                           "offsets start at 0, not {value}")


def _consume(args: argparse.Namespace) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, OFFSET_STORED, Consumer, KafkaException, TopicPartition

    if args.offset is not None and args.partition is None:
        args.parser.error("--offset needs --partition, as with kafka-console-consumer")
    if args.offset is not None and args.from_beginning:
        args.parser.error("give --from-beginning or --offset, not both")
    render = as_json if args.json else args.format
    start = {"earliest": OFFSET_BEGINNING, "latest": OFFSET_END}
    reset = "earliest" if args.from_beginning or args.offset == "earliest" else "latest"
    try:
        consumer = Consumer(client_config(args.bootstrap_server, args.command_config, **{
            "group.id": args.group, "enable.auto.commit": False,
            "auto.offset.reset": reset, "enable.partition.eof": False,
        })) if args.group else GrouplessConsumer(args.bootstrap_server, args.command_config, REQUEST_TIMEOUT_S)
    except (BrokerUnreachable, KafkaException) as exc:
        return _fail(exc, args)
    out: BinaryIO = sys.stdout.buffer
    count = 0
    positions: dict[int, int] = {}  # partition -> next offset, committed for --group
    try:
        partitions = _check_partition(consumer, args.topic, args.partition)
        if args.group and args.partition is None:
            consumer.subscribe([args.topic])
        else:
            chosen = range(partitions) if args.partition is None else [args.partition]
            if args.offset is not None:
                offset = args.offset if isinstance(args.offset, int) else start[args.offset]
            elif args.group:
                offset = OFFSET_STORED  # where the group left off; auto.offset.reset where it has no offset
            else:
                offset = start[reset]
            consumer.assign([TopicPartition(args.topic, p, offset) for p in chosen])
        idle_deadline = _deadline(args.timeout_ms)
        last_commit = time.monotonic()
        while args.max_messages is None or count < args.max_messages:
            wait = 0.5 if idle_deadline is None else max(0.0, min(0.5, idle_deadline - time.monotonic()))
            want = 100 if args.max_messages is None else min(100, args.max_messages - count)
            batch = consumer.consume(want, wait)
            for msg in batch:
                if msg.error() is not None:
                    raise CommandError(_read_error(args.topic, msg))
                out.write(render(msg))
                positions[msg.partition()] = msg.offset() + 1
                count += 1
            if batch:
                out.flush()
                idle_deadline = _deadline(args.timeout_ms)
            elif idle_deadline is not None and time.monotonic() >= idle_deadline:
                break
            if args.group and positions and time.monotonic() - last_commit >= _COMMIT_INTERVAL_S:
                _commit(consumer, args.topic, positions, asynchronous=True)
                last_commit = time.monotonic()
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:  # `consume ... | head`: the reader has had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (CommandError, KafkaException) as exc:
        consumer.close()
        return _fail(exc, args)
    if args.group and positions:
        _commit(consumer, args.topic, positions, asynchronous=False)
    consumer.close()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def _read_error(topic: str, msg: Any) -> str:
    """The line for a message that is an error; a quarantined range names where it starts and how to go on."""
    from confluent_kafka import KafkaError

    if msg.error().code() == KafkaError.INVALID_MSG:  # Kafka's CORRUPT_MESSAGE: the broker quarantined them
        p, o = msg.partition(), msg.offset()
        return (f"{topic} partition {p}: offsets from {o} on are damaged and quarantined by the broker "
                f"(CORRUPT_MESSAGE; its log names the range); to read on after it: --partition {p} --offset N")
    return f"cannot read {topic}: {describe_error(msg.error())}"


def _deadline(timeout_ms: int | None) -> float | None:
    return None if timeout_ms is None else time.monotonic() + timeout_ms / 1000


def _commit(consumer: Any, topic: str, positions: dict[int, int], asynchronous: bool) -> None:
    """Commit exactly what was printed, so a group resumes after the last message shown."""
    from confluent_kafka import TopicPartition

    offsets = [TopicPartition(topic, p, o) for p, o in sorted(positions.items())]
    consumer.commit(offsets=offsets, asynchronous=asynchronous)


def _fail(problem: str | Exception, args: argparse.Namespace) -> int:
    """One line on stderr (one JSON object under --json), exit status 1."""
    return fail(problem if isinstance(problem, str) else describe_error(problem), getattr(args, "json", False))


# parsers ----------------------------------------------------------------------------------


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add `produce` and `consume` to the `kafkacompat` parser."""
    p = sub.add_parser(
        "produce", help="send one message per line of stdin to a topic",
        description=textwrap.fill("Send one message per line of stdin to a topic, like kafka-console-producer and "
                    "`rpk topic produce`. Nothing is printed; a message that cannot be delivered ends the "
                    "command with status 1.", 78),
        epilog="example:\n  printf 'pump1:1450 psi\\npump2:1380 psi\\n' | \\\n"
               "      kafkacompat produce /apps/iot/oilpump_metrics:Pressure --key-separator :\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topic", metavar="TOPIC", help="plain name, /stream/path:topic or stream.path..topic")
    add_bootstrap(p)
    p.add_argument("--key-separator", metavar="SEP", type=_separator,
                   help="split each line at the first SEP into key and value (a line without SEP is an error)")
    p.add_argument("--header", metavar="KEY=VALUE", type=name_value, action="append",
                   help="a header on every message (repeatable)")
    p.add_argument("--partition", metavar="P", type=partition_number,
                   help="send every message to this partition (default: by key, as Kafka's partitioner)")
    p.add_argument("--acks", choices=ACKS, default="all", help="acknowledgement to wait for (default all)")
    p.add_argument("--compression", choices=COMPRESSION, default="none", help="codec of the batches (default none)")
    p.set_defaults(func=_produce, parser=p)

    p = sub.add_parser(
        "consume", help="print a topic's messages",
        description=textwrap.fill("Print a topic's messages, like kafka-console-consumer and `rpk topic consume`: one value "
                    "per line by default. Without --group no consumer group is used at all (nothing is committed, "
                    "no group permission is needed); with --group the group's "
                    "offsets are committed as messages are printed. Ends after --max-messages, after "
                    "--timeout-ms without a message, or on Ctrl-C, and then reports the count on stderr.", 78),
        epilog="examples:\n  kafkacompat consume orders --from-beginning --max-messages 10\n"
               "  kafkacompat consume orders --group audit --format '%p/%o %k=%v\\n'\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topic", metavar="TOPIC", help="plain name, /stream/path:topic or stream.path..topic")
    add_bootstrap(p)
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the earliest message (with --group: where the group has no committed offset)")
    p.add_argument("--offset", metavar="N|earliest|latest", type=_offset,
                   help="start at this offset of --partition (default latest)")
    p.add_argument("--partition", metavar="P", type=partition_number, help="read only this partition")
    p.add_argument("--group", metavar="G", help="consume as this consumer group and commit its offsets")
    p.add_argument("--max-messages", metavar="N", type=count, help="stop after N messages")
    p.add_argument("--timeout-ms", metavar="MS", type=count, help="stop after MS without a message")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--format", metavar="FORMAT", type=_format, default=compile_format(DEFAULT_FORMAT),
                       help=FORMAT_HELP)
    shape.add_argument("--json", action="store_true",
                       help="one JSON object per message: topic, partition, offset, timestamp, key, value, headers")
    p.set_defaults(func=_consume, parser=p)
