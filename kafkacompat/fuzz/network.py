"""Network fuzzing: real client frames, mutated, thrown at a running broker.

    python -m kafkacompat.fuzz.network capture tests/fuzz_corpus/network
    python -m kafkacompat.fuzz.network run --frames 20000 [--bootstrap HOST:PORT]

`capture` runs stock clients (librdkafka through confluent-kafka: producer
with each codec, idempotent producer, group consumer, admin) against an
in-process broker through a recording proxy and writes every request frame
they send, one file each. `run` mutates those frames (and kio-built samples
of every served API version) as a buggy client or an attacker would: bit
flips, interesting integers over lengths and counts, huge varints, cuts,
splices, wrong API versions, size prefixes that lie; half of the Produce
frames instead keep their envelope and get bad records with a valid CRC. Each frame goes on a
connection and the fuzzer waits for the answer or the close before the
next, so every frame is processed. Without --bootstrap it starts a broker
process of its own, logging to a file, and at the end reports: frames sent,
connections the broker closed, tracebacks in the broker's log, the broker's
RSS at start and end, and whether a stock client still produces and
consumes. The exit status is 1 when the broker died, logged a traceback,
grew by more than --max-rss-growth-mb, or failed the client check.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import crc32c

from kafkacompat.protocol.framing import FrameDecoder
from kafkacompat.protocol.messages import MalformedRequestError, decode_request, encode_body, parse_request_header
from kafkacompat.protocol.records import CRC_START, HEADER_SIZE, LOG_OVERHEAD

from ..handlers import SUPPORTED
from .seeds import load_corpus, sample_frames

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "tests" / "fuzz_corpus" / "network"
_INTERESTING_32 = (-1, 0, 1, 0x7F, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000, 1_000_000, -2)
_HUGE_VARINTS = (b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x07", b"\x80\x80\x80\x80\x80\x01", b"\x00")


# --- capture ---------------------------------------------------------------


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, record: list[bytes] | None) -> None:
    decoder = FrameDecoder()
    try:
        while data := await reader.read(65536):
            if record is not None:
                record.extend(decoder.feed(data))
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


def _drive_clients(bootstrap: str) -> None:
    """Stock librdkafka clients doing what users do: admin, produce (each codec), consume in a group."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    topic = f"capture-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1, config={"retention.ms": "3600000"})])[topic].result(15)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5})
        for i in range(50):
            producer.produce(topic, b"value %d " % i * 5, key=b"key-%d" % i, headers={"h": b"%d" % i})
        producer.flush(15)
    idempotent = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for i in range(20):
        idempotent.produce(topic, b"idempotent %d" % i)
    idempotent.flush(15)
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    received, deadline = 0, time.monotonic() + 20
    while received < 50 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            received += 1
            if received % 10 == 0:
                consumer.commit(message=message, asynchronous=False)
    consumer.close()
    admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(15)
    admin.list_consumer_groups(request_timeout=10).result(15)
    admin.delete_topics([topic])[topic].result(15)


def capture(directory: Path) -> int:
    """Record the request frames of a stock client run into `directory`; returns how many."""
    from kafkacompat.testing import Broker

    frames: list[bytes] = []
    loop = asyncio.new_event_loop()
    proxy_sock = socket.socket()
    proxy_sock.bind(("127.0.0.1", 0))
    proxy_port = proxy_sock.getsockname()[1]
    with Broker(host="127.0.0.1", advertised_host="127.0.0.1", advertised_port=proxy_port) as broker:
        broker_port = broker.port

        async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", broker_port)
            await asyncio.gather(_pump(reader, up_writer, frames), _pump(up_reader, writer, None))

        async def serve() -> asyncio.base_events.Server:
            return await asyncio.start_server(relay, sock=proxy_sock)

        async def shutdown() -> None:
            server.close()
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        server = loop.run_until_complete(serve())
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        try:
            _drive_clients(f"127.0.0.1:{proxy_port}")
        finally:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()
    directory.mkdir(parents=True, exist_ok=True)
    for index, frame in enumerate(frames):
        api_key, version = struct.unpack_from(">hh", frame)
        (directory / f"{index:04d}-key{api_key}-v{version}").write_bytes(frame)
    return len(frames)


# --- mutation --------------------------------------------------------------


def mutate(frame: bytes, rng: random.Random, seeds: list[bytes]) -> bytes:
    """One hostile variant of a request frame (without its size prefix)."""
    if rng.random() < 0.5:
        resigned = mutate_produce_records(frame, rng)
        if resigned is not None:
            return resigned
    data = bytearray(frame)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        choice = rng.randrange(9)
        if not data:
            data = bytearray(rng.randbytes(rng.randrange(1, 64)))
        pos = rng.randrange(len(data))
        if choice == 0:
            data[pos] ^= 1 << rng.randrange(8)
        elif choice == 1:
            data[pos] = rng.randrange(256)
        elif choice == 2 and len(data) - pos >= 4:
            struct.pack_into(">i", data, pos, rng.choice(_INTERESTING_32))
        elif choice == 3 and len(data) - pos >= 2:
            struct.pack_into(">h", data, pos, rng.choice((-1, 0, 0x7FFF, -0x8000, 1000)))
        elif choice == 4:
            data[pos:pos] = rng.choice(_HUGE_VARINTS)
        elif choice == 5:
            del data[rng.randrange(pos, len(data) + 1):]
        elif choice == 6:
            other = rng.choice(seeds)
            start = rng.randrange(len(other))
            data[pos:] = other[start : start + rng.randrange(1, 200)]
        elif choice == 7 and len(data) >= 4:
            key = rng.choice(list(SUPPORTED))
            low, high = SUPPORTED[key]
            struct.pack_into(">hh", data, 0, key, rng.randint(low, high + 1))
        elif choice == 8:
            start = rng.randrange(len(data))
            data[pos:pos] = data[start : start + rng.randrange(1, 64)] * rng.randint(1, 8)
    return bytes(data)


def resign_batches(records: bytearray) -> bytes:
    """The records with every whole batch's CRC-32C recomputed.

    Mutated records would otherwise all stop at the CRC check; re-signed,
    they reach record validation as a client's own bad batch would.
    """
    pos = 0
    while len(records) - pos >= HEADER_SIZE:
        (length,) = struct.unpack_from(">i", records, pos + 8)
        stop = pos + LOG_OVERHEAD + length
        if length < HEADER_SIZE - LOG_OVERHEAD or stop > len(records):
            break
        struct.pack_into(">I", records, pos + 17, crc32c.crc32c(bytes(records[pos + CRC_START : stop])))
        pos = stop
    return bytes(records)


def mutate_produce_records(frame: bytes, rng: random.Random) -> bytes | None:
    """A Produce frame whose records (not envelope) are mutated and re-signed; None for other frames."""
    try:
        header = parse_request_header(frame)
        if header.api_key != 0:
            return None
        request = decode_request(header, frame)
    except MalformedRequestError:
        return None
    topics = []
    for topic in request.topic_data:
        parts = []
        for part in topic.partition_data:
            records = part.records
            if records:
                mutated = bytearray(records)
                for _ in range(rng.randint(1, 4)):
                    spot = rng.randrange(HEADER_SIZE if len(mutated) > HEADER_SIZE else 0, len(mutated))
                    mutated[spot] = rng.choice((rng.randrange(256), 0x00, 0x7F, 0x80, 0xFF))
                records = resign_batches(mutated)
            parts.append(dataclasses.replace(part, records=records))
        topics.append(dataclasses.replace(topic, partition_data=tuple(parts)))
    return bytes(frame[: header.body_offset]) + encode_body(dataclasses.replace(request, topic_data=tuple(topics)))


def _size_prefix(payload: bytes, rng: random.Random) -> bytes:
    """Mostly the true size; sometimes one that lies (more, less, negative, enormous)."""
    roll = rng.random()
    if roll < 0.93:
        size = len(payload)
    elif roll < 0.96:
        size = len(payload) + rng.randint(1, 100)
    elif roll < 0.98:
        size = max(len(payload) - rng.randint(1, 10), 0)
    else:
        size = rng.choice((-1, 0x7FFFFFFF, 100 << 20, 200 << 20))
    return struct.pack(">i", size)


# --- sending ---------------------------------------------------------------


class _Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent = self.answered = self.closed = self.silent = 0
        self.unreachable = False

    def add(self, outcome: str) -> None:
        with self.lock:
            self.sent += 1
            setattr(self, outcome, getattr(self, outcome) + 1)


def _outcome(sock: socket.socket, wait: float) -> str:
    """answered (bytes came back), closed (EOF or reset) or silent (nothing within `wait`)."""
    readable, _, _ = select.select([sock], [], [], wait)
    if not readable:
        return "silent"
    try:
        data = sock.recv(1 << 20)
    except OSError:
        return "closed"
    return "answered" if data else "closed"


def _worker(host: str, port: int, frames: list[bytes], seeds: list[bytes], seed: int, stats: _Stats, wait: float) -> None:
    rng = random.Random(seed)
    sock: socket.socket | None = None
    for frame in frames:
        payload = mutate(frame, rng, seeds)
        if sock is None:
            try:
                sock = socket.create_connection((host, port), timeout=10)
            except OSError:  # the broker is gone: the report says so
                stats.unreachable = True
                return
        try:
            sock.sendall(_size_prefix(payload, rng) + payload)
            outcome = _outcome(sock, wait)
        except OSError:
            outcome = "closed"
        stats.add(outcome)
        if outcome != "answered":  # closed by the broker, or stalled on a lying size: start afresh
            sock.close()
            sock = None
    if sock is not None:
        sock.close()


def _replay(host: str, port: int, seeds: list[bytes], wait: float) -> None:
    """Send every seed once, unmutated (DeleteTopics aside), so the topics and groups they name exist."""
    sock = socket.create_connection((host, port), timeout=10)
    try:
        for frame in seeds:
            if struct.unpack_from(">h", frame)[0] == 20:
                continue
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            if _outcome(sock, max(wait, 2.0)) == "closed":
                sock.close()
                sock = socket.create_connection((host, port), timeout=10)
    finally:
        sock.close()


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _client_works(bootstrap: str) -> bool:
    """A stock client (librdkafka) creates a topic, produces and consumes 100 messages."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"after-fuzz-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(100):
        producer.produce(topic, b"m%d" % i)
    if producer.flush(15) != 0:
        return False
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 100 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    return got == [b"m%d" % i for i in range(100)]


def _spawn_broker(log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "kafkacompat", "serve", "--data-dir", "memory://", "--host", "127.0.0.1",
         "--port", str(port)],
        stdout=log_path.open("wb"), stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"the broker exited with {process.returncode}; see {log_path}") from None
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the broker did not start listening within 30 s")


def run(
    frames: int, corpus: Path, bootstrap: str | None, workers: int, seed: int, wait: float,
    log_path: Path, max_rss_growth_mb: float,
) -> dict[str, Any]:
    """Send `frames` mutated frames; the report as a dict (ok: whether every check passed)."""
    seeds = [frame for _, frame in load_corpus(corpus)] if corpus.is_dir() else []
    seeds += [frame for _, frame in sample_frames()]
    process = None
    if bootstrap is None:
        process, port = _spawn_broker(log_path)
        host = "127.0.0.1"
    else:
        host, port_text = bootstrap.rsplit(":", 1)
        port = int(port_text)
    report: dict[str, Any] = {"frames": frames, "seed": seed, "seed_frames": len(seeds)}
    try:
        if process is not None:
            report["rss_start_mb"] = round(_rss_mb(process.pid), 1)
        _replay(host, port, seeds, wait)
        rng = random.Random(seed)
        plan = [rng.choice(seeds) for _ in range(frames)]
        stats = _Stats()
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            jobs = [
                pool.submit(_worker, host, port, plan[i::workers], seeds, seed * 1000 + i, stats, wait)
                for i in range(workers)
            ]
            for job in jobs:
                job.result()
        report.update(
            seconds=round(time.monotonic() - started, 1), sent=stats.sent, answered=stats.answered,
            closed_by_broker=stats.closed, silent=stats.silent,
        )
        report["broker_up"] = not stats.unreachable and (process is None or process.poll() is None)
        if process is not None and report["broker_up"]:
            report["rss_end_mb"] = round(_rss_mb(process.pid), 1)
        report["client_works"] = report["broker_up"] and _client_works(f"{host}:{port}")
    finally:
        if process is not None:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
            report["broker_exit"] = process.returncode
    if process is not None:
        text = log_path.read_text(errors="replace")
        report["tracebacks"] = text.count("Traceback")
        report["log"] = str(log_path)
    grew = report.get("rss_end_mb", 0) - report.get("rss_start_mb", 0)
    report["ok"] = bool(
        report["broker_up"] and report["client_works"] and report.get("tracebacks", 0) == 0
        and grew <= max_rss_growth_mb
    )
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkacompat.fuzz.network", description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="record a stock client's request frames", allow_abbrev=False)
    cap.add_argument("directory", type=Path, nargs="?", default=DEFAULT_CORPUS)
    go = sub.add_parser("run", help="send mutated frames to a broker", allow_abbrev=False)
    go.add_argument("--frames", type=int, default=20_000, help="mutated frames to send (default 20000)")
    go.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="captured frames to start from")
    go.add_argument("--bootstrap", metavar="HOST:PORT", help="a running broker (default: start one)")
    go.add_argument("--workers", type=int, default=4, help="connections sending at once (default 4)")
    go.add_argument("--seed", type=int, default=1, help="random seed; the same seed sends the same frames")
    go.add_argument("--wait", type=float, default=0.3, help="seconds to wait for an answer per frame")
    go.add_argument("--log", type=Path, help="the started broker's log (default: a temporary file)")
    go.add_argument("--max-rss-growth-mb", type=float, default=100.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.command == "capture":
        print(f"captured {capture(args.directory)} frames into {args.directory}")
        return 0
    log_path = args.log or Path(tempfile.mkstemp(prefix="netfuzz-broker-", suffix=".log")[1])
    report = run(args.frames, args.corpus, args.bootstrap, args.workers, args.seed, args.wait, log_path,
                 args.max_rss_growth_mb)
    print(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
