"""What record validation costs on produce: the broker with it and without it, same run.

    python -m kafkacompat.bench.validation [--seconds 3] [--rounds 3]

librdkafka tops out near a million 100-byte messages a second in one
process, which leaves the broker partly idle and would hide the cost, so
this drives the broker itself: pre-built Produce v9 requests of one 1 MiB
batch each (100-byte messages: ~9,000 records; 16 KiB: 62 records; and
100-byte messages zstd-compressed), acks=1, five in flight on one
connection as librdkafka keeps them, against a broker subprocess on the
in-memory store. "without" is the same broker with the produce handler's
`_validate` replaced by a no-op, i.e. the produce path as it was before
validation; the two alternate per round, each on a fresh broker, and the
table gives the median msg/s, broker CPU per message and the ratios. On a
shared machine msg/s follows the neighbours' load; the broker's CPU per
message does not, and its ratio (without / with) is the throughput the
broker keeps when it is the bottleneck.
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

from kafkacompat.frames import read_frame
from kafkacompat.protocol.compression import Codec
from kafkacompat.protocol.messages import encode_body, make
from kafkacompat.protocol.records import Record, build_batch

from ..testing.ports import free_port
from .procstats import cpu_seconds

_REPO_ROOT = Path(__file__).resolve().parents[2]
_WITHOUT = (
    "import sys, kafkacompat.handlers.produce as produce\n"
    "async def _skip(*args, **kwargs): return None\n"
    "produce._validate = _skip\n"
    "from kafkacompat.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)
_WITH = "import sys\nfrom kafkacompat.cli import main\nsys.exit(main(sys.argv[1:]))\n"
IN_FLIGHT = 5
TOPIC = "validation-bench"


def _batch(size: int, codec: Codec, target: int = 1 << 20) -> tuple[bytes, int]:
    count = max(target // (size + 20), 1)
    now = int(time.time() * 1000)
    payload = os.urandom(size // 2).hex().encode()[:size]
    records = [Record(b"key-%d" % i, payload, [], now) for i in range(count)]
    return build_batch(records, compression=codec), count


def _request(batch: bytes, correlation_id: int) -> bytes:
    import kio.schema.produce.v9.request as m

    body = encode_body(make(
        m.ProduceRequest, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30),
        topic_data=(make(m.TopicProduceData, name=TOPIC, partition_data=(
            make(m.PartitionProduceData, index=0, records=batch),)),),
    ))
    client = b"validation-bench"
    header = struct.pack(">hhih", 0, 9, correlation_id, len(client)) + client + b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body


def _start(validating: bool, port: int) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-c", _WITH if validating else _WITHOUT, "serve", "--data-dir", "memory://",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "WARNING"],
        cwd=_REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("broker did not start")


def _create_topic(port: int) -> None:
    import kio.schema.create_topics.v7.request as m

    body = encode_body(make(
        m.CreateTopicsRequest, topics=(make(m.CreatableTopic, name=TOPIC, num_partitions=1, replication_factor=-1,
                                            assignments=(), configs=()),),
        timeout=datetime.timedelta(seconds=10), validate_only=False,
    ))
    header = struct.pack(">hhih", 19, 7, 1, 5) + b"bench" + b"\x00"
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        read_frame(sock)


def measure(validating: bool, batch: bytes, records: int, seconds: float) -> tuple[float, float]:
    """(messages per second, broker CPU microseconds per message) for one fresh broker."""
    port = free_port()
    process = _start(validating, port)
    try:
        _create_topic(port)
        requests = [_request(batch, i) for i in range(IN_FLIGHT)]
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            in_flight: deque[int] = deque()
            sent = done = 0
            for _ in range(IN_FLIGHT * 2):  # warm up
                sock.sendall(requests[0])
                read_frame(sock)
            cpu_before, started = cpu_seconds(process.pid), time.perf_counter()
            while True:
                elapsed = time.perf_counter() - started
                while len(in_flight) < IN_FLIGHT and elapsed < seconds:
                    sock.sendall(requests[sent % IN_FLIGHT])
                    in_flight.append(sent)
                    sent += 1
                if not in_flight:
                    break
                response = read_frame(sock)
                error = struct.unpack_from(">h", response, 4 + 1 + 1 + 1 + len(TOPIC) + 1 + 4)[0]
                if error:
                    raise RuntimeError(f"produce failed with error {error}")
                in_flight.popleft()
                done += 1
            wall = time.perf_counter() - started
            cpu = cpu_seconds(process.pid) - cpu_before
        messages = done * records
        return messages / wall, cpu / messages * 1e6
    finally:
        process.terminate()
        process.wait(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkacompat.bench.validation", description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
    parser.add_argument("--seconds", type=float, default=3.0, help="producing time per measurement (default 3)")
    parser.add_argument("--rounds", type=int, default=3, help="measurements per row and mode (default 3)")
    args = parser.parse_args(argv)
    rows = [("100 B", 100, Codec.NONE), ("16 KiB", 16384, Codec.NONE), ("100 B zstd", 100, Codec.ZSTD)]
    print(f"{'messages':<12} {'without msg/s':>14} {'with msg/s':>12} {'ratio':>7} "
          f"{'without cpu us/msg':>19} {'with cpu us/msg':>16} {'cpu ratio':>10}")
    for label, size, codec in rows:
        batch, records = _batch(size, codec)
        results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
        for _ in range(args.rounds):
            for validating in (False, True):
                results[validating].append(measure(validating, batch, records, args.seconds))
        without = statistics.median(r[0] for r in results[False])
        with_ = statistics.median(r[0] for r in results[True])
        cpu_without = statistics.median(r[1] for r in results[False])
        cpu_with = statistics.median(r[1] for r in results[True])
        print(f"{label:<12} {without:>14,.0f} {with_:>12,.0f} {with_ / without:>7.3f} "
              f"{cpu_without:>19.3f} {cpu_with:>16.3f} {cpu_without / cpu_with:>10.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
