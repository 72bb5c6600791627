"""Trust under faults (issue 28): what outside testers found, driven as they drove it.

A real `kafkacompat serve` process on a real data dir, stopped cleanly
(SIGTERM) or not (SIGKILL), files damaged in between as bit rot or an
operator does, and the `kafkacompat produce` / `consume` / `store check`
commands and stock clients on top.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import CorruptRecordError

from compat_tests.reference import run_tool
from kafkacompat.testing.ports import free_port
from kafkacompat.testing.reference_kafka import unavailable
from tests.cli.conftest import kafkacompat
from tests.test_cli_serve import start


class Served:
    """One `kafkacompat serve` process on a data dir and a fixed port (so clients can come back)."""

    def __init__(self, data: Path, port: int, *extra: str) -> None:
        self.data, self.port, self.extra = data, port, extra
        self.proc: subprocess.Popen | None = None
        self.output = ""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Served:
        """Start it; `output` then holds what it logs from this start on."""
        self.proc = start(["--data-dir", str(self.data), "--host", "127.0.0.1", "--port", str(self.port),
                           *self.extra])
        deadline = time.monotonic() + 30
        line = self.output = ""
        while "listening on" not in line:  # keeping what the store said while it opened
            line = self.proc.stdout.readline()
            assert line or self.proc.poll() is None, f"serve exited: {self.output}"
            assert time.monotonic() < deadline, f"serve never listened: {self.output}"
            self.output += line
        return self

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stop it with `sig`; returns its exit status and keeps what it logged in `output`."""
        assert self.proc is not None
        self.proc.send_signal(sig)
        status = self.proc.wait(timeout=60)
        self.output += self.proc.stdout.read()
        self.proc = None
        return status

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def cli(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return kafkacompat(*args, "--bootstrap-server", self.bootstrap, input=input)

    def produce(self, topic: str, text: str) -> None:
        done = self.cli("produce", topic, "--acks", "all", input=text)
        assert done.returncode == 0, done.stderr

    def consume(self, topic: str, *args: str) -> subprocess.CompletedProcess[str]:
        start = () if "--offset" in args else ("--from-beginning",)
        return self.cli("consume", topic, *start, "--format", "%o:%v\n", "--timeout-ms", "5000", *args)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    broker = Served(tmp_path / "data", free_port())
    yield broker
    broker.kill()


def active_log(data: Path, topic: str) -> Path:
    return sorted((data / "streams" / "default" / topic / "0").glob("*.log"))[-1]


def flip_last_byte(path: Path) -> None:
    """Bit rot in the last batch (its value: inside the CRC)."""
    with open(path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        byte = f.read(1)[0]
        f.seek(-1, os.SEEK_END)
        f.write(bytes([byte ^ 0x01]))


def offsets_read(done: subprocess.CompletedProcess[str]) -> dict[int, str]:
    return {int(o): v for o, _, v in (line.partition(":") for line in done.stdout.splitlines())}


@pytest.mark.parametrize("repair_offline", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["broker-start", "store-check-repair"])
def test_a_write_after_a_quarantine_survives_a_clean_restart(served: Served, repair_offline: bool) -> None:
    served.start()
    served.produce("t", "A\n")
    served.produce("t", "B\n")
    assert served.stop() == 0
    flip_last_byte(active_log(served.data, "t"))
    if repair_offline:
        done = kafkacompat("store", "check", str(served.data), "--repair")
        assert done.returncode == 1 and "quarantine offsets 1..1" in done.stdout, done.stdout
    served.start()
    assert served.stop() == 0
    check = kafkacompat("store", "check", str(served.data))
    assert check.returncode == 0, check.stdout  # a known quarantine is no new damage
    served.start()
    served.produce("t", "C\n")  # acknowledged at offset 2
    assert served.stop() == 0
    check = kafkacompat("store", "check", str(served.data))
    assert check.returncode == 0, check.stdout
    served.start()
    read = served.consume("t", "--partition", "0", "--offset", "2", "--max-messages", "1")  # opens the partition
    assert served.stop() == 0
    assert "cut the" not in served.output, served.output
    assert offsets_read(read) == {2: "C"}, (read.stdout, read.stderr)


def test_a_write_after_a_quarantine_survives_a_kill_before_any_checkpoint(served: Served) -> None:
    """The quarantine a clean start finds is known after a kill -9 that came before the manifest was written.

    (The 60-minute disk campaign: the batch written after the quarantined one
    read as an offset jump, and the unclean start cut every acknowledged write
    after it.)
    """
    served.start()
    served.produce("t", "A\n")
    served.produce("t", "B\n")
    assert served.stop() == 0
    flip_last_byte(active_log(served.data, "t"))
    served.start()
    served.produce("t", "C\n")  # acknowledged at offset 2: the last batch, no later one vouches for its offset
    served.stop(signal.SIGKILL)
    served.start()
    done = served.consume("t", "--partition", "0", "--offset", "2", "--max-messages", "1")
    assert offsets_read(done) == {2: "C"}, (done.stdout, done.stderr)
    served.produce("t", "D\n")
    assert offsets_read(served.consume("t", "--partition", "0", "--offset", "2")) == {2: "C", 3: "D"}


def cut_tail(path: Path) -> None:
    os.truncate(path, os.path.getsize(path) - 10)  # the last batch torn


def zero_tail(path: Path) -> None:
    with open(path, "r+b") as f:
        f.seek(-30, os.SEEK_END)
        f.write(bytes(30))


# damage -> how many of the 5 messages before it are still there
TAIL_DAMAGE = {"cut": (cut_tail, 4), "zeroed": (zero_tail, 4), "deleted": (os.unlink, 0)}


@pytest.mark.parametrize("damage", [pytest.param("cut", marks=pytest.mark.slow),
                                    pytest.param("zeroed", marks=pytest.mark.slow), "deleted"])
def test_no_offset_is_handed_out_twice_after_an_unclean_stop_and_a_damaged_tail(served: Served, damage: str) -> None:
    served.start()
    for i in range(5):
        served.produce("t", f"old{i}\n")
    served.stop(signal.SIGKILL)
    spoil, kept = TAIL_DAMAGE[damage]
    spoil(active_log(served.data, "t"))
    served.extra = ("--skip-damaged",)  # read past the lost range to see where new messages went
    served.start()
    for i in range(5):
        served.produce("t", f"new{i}\n")
    read = offsets_read(served.consume("t", "--max-messages", str(kept + 5)))
    assert served.stop() == 0
    new = {o for o, v in read.items() if v.startswith("new")}
    assert len(new) == 5 and min(new) > 4, read  # offsets 0..4 were handed out before the stop
    assert "quarantine offsets" in served.output, served.output  # the gap is reported as a lost range



def test_no_offset_is_handed_out_twice_when_killed_again_after_recovering_a_zeroed_log(served: Served) -> None:
    """The whole active log zeroed after a kill -9, the recovery that cut it killed again before the partition
    took a write (a chaos campaign's zero-active-tail, then delete-active elsewhere): the offsets acknowledged
    before the first kill are still never handed out again, and the group's commit never reads back lower."""
    served.start()
    for i in range(5):
        served.produce("t", f"old{i}\n")
    consumer = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "g", "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("t", 0, 5)], asynchronous=False)
    consumer.close()
    served.stop(signal.SIGKILL)
    log = active_log(served.data, "t")
    log.write_bytes(bytes(log.stat().st_size))  # the whole active partitionlet zeroed
    served.extra = ("--skip-damaged",)  # read past the lost range to see where new messages went
    served.start()
    served.consume("t", "--max-messages", "1", "--timeout-ms", "2000")  # opens the partition: its recovery runs
    served.stop(signal.SIGKILL)
    assert "quarantine offsets 0.." in served.output, served.output
    served.start()
    for i in range(5):
        served.produce("t", f"new{i}\n")
    read = offsets_read(served.consume("t", "--max-messages", "5"))
    assert len(read) == 5 and min(read) > 4, read  # offsets 0..4 were handed out before the first kill
    consumer = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "g", "enable.auto.commit": False,
                         "auto.offset.reset": "latest"})
    consumer.subscribe(["t"])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:  # the group goes on from its commit: the new messages
        msg = consumer.poll(1)
        if msg is not None and not msg.error():
            got.append(msg.offset())
    assert sorted(got) == sorted(read), got
    consumer.commit(asynchronous=False)
    assert consumer.committed([TopicPartition("t", 0)], timeout=30)[0].offset == max(read) + 1 > 5  # never lower
    consumer.close()
    assert served.stop() == 0

# `kafkacompat serve` whose disk fills up when the test says so: every metadata file write (chain.json,
# the clean-shutdown marker) then fails with ENOSPC, as on a disk whose reserve is spent
FULL_WHEN_FLAGGED = """
import os, sys
from kafkacompat.storage.disk import files
from kafkacompat.cli import main

real = files._write_atomic

def write(path, data, durable):
    if os.path.exists(os.environ["DISK_FULL_FLAG"]):
        raise files.StorageFullError(f"no room to write {path}: No space left on device")
    return real(path, data, durable)

files._write_atomic = write
sys.argv[0] = "kafkacompat"
sys.exit(main())
"""


def test_sigterm_on_a_full_disk_stops_cleanly_and_loses_nothing(tmp_path: Path) -> None:
    flag = tmp_path / "disk-full"
    served = Served(tmp_path / "data", free_port())
    served.start()
    served.produce("t", "m0\n")
    assert served.stop() == 0
    env = {**os.environ, "DISK_FULL_FLAG": str(flag)}
    proc = subprocess.Popen([sys.executable, "-c", FULL_WHEN_FLAGGED, "serve", "--data-dir", str(served.data),
                             "--host", "127.0.0.1", "--port", str(served.port)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    try:
        line = ""
        while "listening on" not in line:
            line = proc.stdout.readline()
            assert line, "serve did not start"
        served.produce("t", "m1\nm2\n")  # since the last manifest write: a checkpoint is owed on stop
        flag.touch()
        proc.send_signal(signal.SIGTERM)
        status = proc.wait(timeout=60)
        output = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert status == 0 and "Traceback" not in output, output
    assert "no room to write" in output and "chain.json" in output, output  # said, in a line
    assert not (served.data / ".clean").exists()  # the manifest was not saved: the next start checks the tail
    flag.unlink()
    served.start()
    read = served.consume("t", "--max-messages", "3")
    assert offsets_read(read) == {0: "m0", 1: "m1", 2: "m2"}, read.stderr
    served.produce("t", "after\n")
    assert served.stop() == 0, served.output
    assert (served.data / ".clean").exists()
    served.start()
    assert "not shut down cleanly" not in served.output
    assert served.stop() == 0


# `kafkacompat serve` whose volume has no room for data while the flag file exists: every append then
# fails as on a full disk whose metadata reserve is spent (metadata writes still succeed)
APPENDS_FULL_WHEN_FLAGGED = """
import os, sys
from kafkacompat.storage.disk import volumes
from kafkacompat.storage.errors import StorageFullError
from kafkacompat.cli import main

real = volumes.Volume.ensure_reserve

def ensure_reserve(self):
    if os.path.exists(os.environ["DISK_FULL_FLAG"]):
        raise StorageFullError(f"volume {self.path} is full (its metadata reserve is in use)")
    return real(self)

volumes.Volume.ensure_reserve = ensure_reserve
sys.argv[0] = "kafkacompat"
sys.exit(main())
"""


def serve_appends_full_when_flagged(served: Served, flag: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "DISK_FULL_FLAG": str(flag)}
    proc = subprocess.Popen([sys.executable, "-c", APPENDS_FULL_WHEN_FLAGGED, "serve", "--data-dir",
                             str(served.data), "--host", "127.0.0.1", "--port", str(served.port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output = line = ""
    while "listening on" not in line:
        line = proc.stdout.readline()
        assert line, f"serve did not start: {output}"
        output += line
    return proc


def test_a_broker_starts_on_a_full_disk_with_a_transaction_to_finish(tmp_path: Path) -> None:
    """Found by the chaos campaign (seed 2028, full-disk-sigterm): a commit decided while the disk was full
    left its markers to write; the next start on the full disk tried them, failed and exited 4 ("in use by
    another broker"). It starts, and finishes the transaction once there is room."""
    flag = tmp_path / "disk-full"
    served = Served(tmp_path / "data", free_port())
    proc = serve_appends_full_when_flagged(served, flag)
    try:
        producer = Producer({"bootstrap.servers": served.bootstrap, "transactional.id": "t-full"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("t", b"in-txn")
        assert producer.flush(30) == 0
        flag.touch()
        producer.commit_transaction(30)  # decided (PrepareCommit stored); its markers cannot be written yet
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        proc = serve_appends_full_when_flagged(served, flag)  # still full: it must start all the same
        flag.unlink()
        consumer = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "g", "isolation.level":
                             "read_committed", "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition("t", 0, 0)])
        deadline, seen = time.monotonic() + 30, []
        while not seen and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
        consumer.close()
        assert seen == [b"in-txn"]
    finally:
        proc.kill()
        proc.wait()


def flip_in_batch(path: Path, offset_in_file: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset_in_file)
        byte = f.read(1)[0]
        f.seek(offset_in_file)
        f.write(bytes([byte ^ 0x01]))


def quarantine_offset_1(served: Served) -> None:
    """Offsets 0, 1, 2 hold A, B, C; bit rot in B's value, found when the partition opens after the next start
    (off the event loop, at its first touch or the background check): offset 1 is quarantined (QUARANTINED says so)."""
    served.start()
    for value in ("A", "B", "C"):
        served.produce("t", value + "\n")  # three batches of 69 bytes
    assert served.stop() == 0
    flip_in_batch(active_log(served.data, "t"), 69 + 60)
    served.start()


QUARANTINED = "quarantine offsets 1..1"  # in the broker's log once stopped: the damage was found where it was put


def test_consumers_are_told_of_a_quarantined_range_not_left_waiting(served: Served) -> None:
    http_port = free_port()
    served.extra = ("--http-port", str(http_port))
    quarantine_offset_1(served)
    # the CLI prints what comes before, then one line naming topic, partition and offset, and fails
    done = served.consume("t")
    assert done.returncode == 1 and offsets_read(done) == {0: "A"}, (done.stdout, done.stderr)
    assert done.stderr.splitlines() == [
        "kafkacompat: error: t partition 0: offsets from 1 on are damaged and quarantined by the broker "
        "(CORRUPT_MESSAGE; its log names the range); to read on after it: --partition 0 --offset N"]
    # librdkafka hands the application an error event at the offset (CORRUPT_MESSAGE is INVALID_MSG there)
    consumer = Consumer({"bootstrap.servers": served.bootstrap, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([TopicPartition("t", 0, 0)])
    seen: list[tuple[int, object]] = []
    deadline = time.monotonic() + 15
    while len(seen) < 2 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None:
            seen.append((msg.offset(), msg.error().code() if msg.error() else msg.value()))
    consumer.seek(TopicPartition("t", 0, 2))  # as Kafka's message says: seek past the record to go on
    while len(seen) < 3 and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            seen.append((msg.offset(), msg.value()))
    consumer.close()
    assert seen == [(0, b"A"), (1, KafkaError.INVALID_MSG), (2, b"C")]
    # kafka-python raises it from poll()
    kp = KafkaConsumer(bootstrap_servers=served.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    kp.assign([KafkaTopicPartition("t", 0)])
    got: list[bytes] = []
    with pytest.raises(CorruptRecordError):
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            got += [m.value for batch in kp.poll(200).values() for m in batch]
    kp.close()
    assert got == [b"A"]
    if shutil.which("kcat") is not None:  # kcat (librdkafka) stops with the error instead of hanging
        done = subprocess.run(["kcat", "-b", served.bootstrap, "-C", "-t", "t", "-p", "0", "-o", "beginning", "-e"],
                              capture_output=True, text=True, timeout=30)
        assert (done.returncode, done.stdout) == (1, "A\n"), done.stderr
        assert "Topic t [0] error: Fetch from broker 1 failed: Broker: Invalid message" in done.stderr
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10) as answer:
        metrics = answer.read().decode()
    assert re.search(r'kafkacompat_request_errors_total\{api="Fetch",[^}]*error="CORRUPT_MESSAGE"[^}]*\} [1-9]',
                     metrics), [line for line in metrics.splitlines() if "errors_total" in line]
    assert served.stop() == 0
    assert QUARANTINED in served.output, served.output


def test_the_java_consumer_throws_at_a_quarantined_range(served: Served) -> None:
    """Kafka 4.1's console consumer: its KafkaConsumer.poll() throws, naming offset and partition."""
    if unavailable():
        pytest.skip(unavailable())
    quarantine_offset_1(served)
    done = run_tool("kafka-console-consumer", "--bootstrap-server", served.bootstrap, "--topic", "t",
                    "--from-beginning", "--timeout-ms", "10000")
    assert done.stdout.split() == ["A"]
    assert "KafkaException: Encountered corrupt message when fetching offset 1 for topic-partition t-0" in done.stderr
    assert served.stop() == 0
    assert QUARANTINED in served.output, served.output
