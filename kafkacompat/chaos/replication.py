"""The replication engine: two clusters (two `kafkacompat serve` on the disk store), a stream replicated one way.

Replication promises more than a single broker does (docs/replication.md):
every message at the same offset in every cluster, byte for byte; a link
that resumes after a restart of either side losing and repeating nothing;
cursors carried once the messages they point at are there, so a group
moved to the replica resumes at its last commit. A campaign is where those
promises meet faults, so this engine runs the workload against the source
(node 1) while the nemesis kills, pauses and restarts either cluster (node
2 is the replica) or pauses the link (`stream replica pause`, then `resume`,
as an operator would). After the source's final read, `final_checks` waits
until the replica's end offsets equal the source's (a condition with a
timeout), reads the replica whole, reads the group's cursors on both
clusters, and fails the group over to the replica with its carried cursor;
the checker (replica_checker.py) judges those events.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from .engine import Engine, StorageFault
from .history import History
from .process import BrokerProcess, BrokerProcesses, free_port
from .workload import COMMON, GROUP, PARTITIONS, final_read

STREAM = "/chaos"
PARTITIONLET_SIZE = "32KiB"  # as the disk engine: the link ships from sealed and active partitionlets
SOURCE, REPLICA = 1, 2
CATCH_UP_TIMEOUT = 120.0  # seconds the link gets to bring the replica to the source's end offsets
CURSOR_TIMEOUT = 30.0  # and then to carry the group's cursors
FAILOVER_TIMEOUT = 90.0  # a consumer failing over gets this long to read to the replica's end


class ReplicationEngine(BrokerProcesses, Engine):
    name = "replication"
    final_checks_s = CATCH_UP_TIMEOUT + CURSOR_TIMEOUT + FAILOVER_TIMEOUT + 60  # and the replica read (campaign.watch)

    def __init__(self, workdir: Path, history: History) -> None:
        self.history = history
        self.nodes = [SOURCE, REPLICA]
        self.ports = {n: free_port() for n in self.nodes}
        self.addresses = {n: f"127.0.0.1:{p}" for n, p in self.ports.items()}
        self.bootstrap = self.addresses[SOURCE]
        self.log = open(workdir / "broker.log", "a", encoding="utf-8")
        lock = threading.Lock()
        self.brokers = {}
        for node, cluster in ((SOURCE, "source"), (REPLICA, "replica")):
            data = workdir / cluster
            self.brokers[node] = BrokerProcess(
                node, ["--data-dir", str(data), "--host", "127.0.0.1", "--port", str(self.ports[node]),
                       "--cluster-name", cluster, "--group-initial-rebalance-delay-ms", "500"],
                history, self.log, lock, clean_marker=data / ".clean")
        self.replica_name = f"{self.addresses[REPLICA]}{STREAM}"
        self.watching = threading.Event()
        self.watcher = threading.Thread(target=self._watch_replica_cursors, name="chaos-replica-cursors", daemon=True)


    def close(self) -> None:
        self._stop_watching()
        for b in self.brokers.values():
            b.kill()
        self.log.close()

    # the stream, its topics and the link, made with the commands a user types

    def _cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A `kafkacompat` command against the source cluster, where links are managed."""
        return subprocess.run([sys.executable, "-m", "kafkacompat", *args, "--bootstrap-server",
                               self.addresses[SOURCE]], capture_output=True, text=True, timeout=60)

    def setup(self, rng: random.Random) -> dict[str, Any]:
        fsync = rng.choice(["none", "interval", "always"])
        commands = [("stream", "create", STREAM, "--fsync", fsync, "--partitionlet-size", PARTITIONLET_SIZE,
                     "--ttl", "0")]
        commands += [("topic", "create", f"{STREAM}:{topic.split('..')[1]}", "--partitions", str(count))
                     for topic, count in PARTITIONS.items()]
        commands.append(("stream", "replica", "autosetup", "--path", STREAM, "--replica", self.replica_name))
        for command in commands:
            done = self._cli(*command)
            if done.returncode != 0:
                raise subprocess.SubprocessError(f"{' '.join(command)}: {done.stderr.strip() or done.stdout}")
        self.watcher.start()
        return {"fsync": fsync, "partitionlet_size": PARTITIONLET_SIZE, "clusters": 2,
                "replica": self.replica_name}

    # the link's own fault: paused by the operator's command, resumed after the nemesis's hold

    def storage_faults(self) -> list[StorageFault]:
        return [StorageFault("link-pause", lambda rng: self._link("pause"), live=True,
                             heal=lambda: self._link("resume", record=True))]

    def _link(self, action: str, record: bool = False) -> dict[str, Any]:
        done = self._cli("stream", "replica", action, "--path", STREAM, "--replica", self.replica_name)
        out = {"link": action, "rc": done.returncode, "said": (done.stderr or done.stdout).strip()[:300]}
        if record or done.returncode != 0:
            self.history.record("link", **out)
        return out

    # after the source's final read: the replica, the cursors, a failover

    def _watch_replica_cursors(self) -> None:
        """While the campaign runs: every second the group's cursors on the replica, then the replica's end
        offsets. A cursor is carried only once its messages are there, so it never exceeds the end read after it."""
        tps = [(t, p) for t, n in PARTITIONS.items() for p in range(n)]
        while not self.watching.wait(1):
            cursors = committed(self.addresses[REPLICA], tps)
            ends = end_offsets(self.addresses[REPLICA], tps)
            for (topic, partition), cursor in cursors.items():
                if cursor >= 0 and ends[(topic, partition)] >= 0:
                    self.history.record("replica-observed", group=GROUP, topic=topic, partition=partition,
                                        cursor=cursor, end=ends[(topic, partition)])

    def _stop_watching(self) -> None:
        self.watching.set()
        if self.watcher.is_alive():
            self.watcher.join(30)

    def final_checks(self) -> None:
        self._stop_watching()
        self._link("resume", record=True)  # a pause the nemesis could not undo (it never should be needed)
        ends = self._wait_caught_up()
        final_read(self.addresses[REPLICA], self.history, event="replica-final")
        cursors = self._wait_cursors_carried(ends)
        self._fail_over(cursors, ends)

    def _wait_caught_up(self) -> dict[tuple[str, int], int]:
        """Wait until every partition's end offset on the replica equals the source's; record both."""
        tps = [(t, p) for t, n in PARTITIONS.items() for p in range(n)]
        started = time.monotonic()
        source, replica = end_offsets(self.addresses[SOURCE], tps), end_offsets(self.addresses[REPLICA], tps)
        while source != replica and time.monotonic() - started < CATCH_UP_TIMEOUT:
            time.sleep(0.5)  # the source may still grow: a transaction its coordinator ends (timeout) adds a marker
            source, replica = end_offsets(self.addresses[SOURCE], tps), end_offsets(self.addresses[REPLICA], tps)
        waited = round(time.monotonic() - started, 2)
        for topic, partition in tps:
            self.history.record("replica-end", topic=topic, partition=partition, source=source[(topic, partition)],
                                replica=replica[(topic, partition)], waited=waited)
        return replica

    def _wait_cursors_carried(self, ends: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Wait until the group's cursors on the replica equal the source's; record both with the replica's end."""
        tps = list(ends)
        started = time.monotonic()
        source, replica = committed(self.addresses[SOURCE], tps), committed(self.addresses[REPLICA], tps)
        while source != replica and time.monotonic() - started < CURSOR_TIMEOUT:
            time.sleep(0.5)
            replica = committed(self.addresses[REPLICA], tps)
        for topic, partition in tps:
            self.history.record("replica-cursor", group=GROUP, topic=topic, partition=partition,
                                source=source[(topic, partition)], replica=replica[(topic, partition)],
                                replica_end=ends[(topic, partition)])
        return replica

    def _fail_over(self, cursors: dict[tuple[str, int], int], ends: dict[tuple[str, int], int]) -> None:
        """The group's consumer switched to the replica's address, as a user fails over: it reads on from the
        carried cursors (read_committed, librdkafka's default) until every partition reached the replica's end."""
        consumer = Consumer({**COMMON, "bootstrap.servers": self.addresses[REPLICA], "group.id": GROUP,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "enable.partition.eof": True, "isolation.level": "read_committed"})
        consumer.subscribe(list(PARTITIONS))
        at_end: set[tuple[str, int]] = set()
        deadline = time.monotonic() + FAILOVER_TIMEOUT
        try:
            while len(at_end) < len(ends) and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                tp = (msg.topic(), msg.partition())
                if msg.error() is None:
                    self.history.record("failover-read", group=GROUP, topic=tp[0], partition=tp[1],
                                        offset=msg.offset(), value=msg.value().decode())
                elif msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(tp)
                elif msg.error().code() not in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
                    self.history.record("client-error", role="failover", error=str(msg.error()), fatal=False)
        except KafkaException as exc:
            self.history.record("client-error", role="failover", error=str(exc.args[0]), fatal=False)
        finally:
            consumer.close()
        self.history.record("failover-end", group=GROUP, complete=len(at_end) == len(ends),
                            at_end=sorted(f"{t}/{p}" for t, p in at_end))


def end_offsets(bootstrap: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Each partition's high watermark on one cluster (-1 where it cannot be had)."""
    consumer = Consumer({**COMMON, "bootstrap.servers": bootstrap, "group.id": "chaos-ends"})
    out = {}
    try:
        for topic, partition in tps:
            try:
                out[(topic, partition)] = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                                         timeout=10)[1]
            except KafkaException:
                out[(topic, partition)] = -1
    finally:
        consumer.close()
    return out


def committed(bootstrap: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The group's committed offset of each partition on one cluster (-1: none, or it cannot be had)."""
    consumer = Consumer({**COMMON, "bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        answer = consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=10)
        return {(tp.topic, tp.partition): tp.offset if tp.error is None and tp.offset >= 0 else -1
                for tp in answer}
    except KafkaException:
        return {tp: -1 for tp in tps}
    finally:
        consumer.close()
