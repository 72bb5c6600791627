"""kcat (Debian package), librdkafka's command-line client, run as a user runs it.

kcat produces from stdin (-K for keys, -H for the run's headers) without
printing offsets, consumes with -J (one JSON object per record), and joins
balanced groups with -G. It has no admin or group-listing commands.
"""

from __future__ import annotations

import json
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from typing import Any

from ..scenario_data import HEADERS, Received, key, value
from . import ClientUnavailable, Driver, NotApplicable

TIMEOUT = 30.0
KEY_DELIMITER = "\t"
NO_ADMIN = "kcat has no admin commands (topics, configs, records, groups)"


class KcatDriver(Driver):
    name = "kcat"

    def __init__(self, bootstrap: str) -> None:
        if shutil.which("kcat") is None:
            raise ClientUnavailable("kcat is not on PATH (Debian package kcat)")
        self.bootstrap = bootstrap
        banner = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10).stdout
        found = re.search(r"Version ([\d.]+) .*?librdkafka ([\d.]+)", banner)
        self.version = f"kcat {found.group(1)}, librdkafka {found.group(2)}" if found else "kcat (version unknown)"

    def _base(self, *args: str) -> list[str]:
        return ["kcat", "-b", self.bootstrap, "-q", *args]

    def _produce_argv(self, topic: str, partition: int, compression: str | None, acks: str, idempotent: bool) -> list[str]:
        argv = self._base("-P", "-t", topic, "-p", str(partition), "-K", KEY_DELIMITER)
        for name, text in HEADERS:
            argv += ["-H", f"{name}={text}"]
        argv += ["-X", f"acks={acks}", "-X", f"enable.idempotence={str(idempotent).lower()}", "-X", "linger.ms=5"]
        if compression:
            argv += ["-X", f"compression.codec={compression}"]
        return argv

    def produce(self, topic, n, *, prefix="", compression=None, acks="all", idempotent=False, partition=0):
        lines = "".join(f"{key(prefix, i)}{KEY_DELIMITER}{value(prefix, i)}\n" for i in range(n))
        done = subprocess.run(
            self._produce_argv(topic, partition, compression, acks, idempotent),
            input=lines, capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )
        assert done.returncode == 0, f"kcat -P exited {done.returncode}: {done.stderr}"
        return None  # kcat does not print the offsets it was given

    @staticmethod
    def _record(line: str) -> Received:
        item = json.loads(line)
        flat = item.get("headers") or []
        return Received(
            item["partition"], item["offset"], item.get("key"), item.get("payload"),
            tuple(zip(flat[::2], flat[1::2])), item.get("ts", -1),
        )

    def _consume_process(self, argv: list[str]) -> subprocess.Popen:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def _collect(self, proc: subprocess.Popen, n: int, between: Any = None) -> list[Received]:
        """Records kcat prints until it has n (it exits by itself with -c n)."""
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        out: list[Received] = []
        deadline = time.monotonic() + TIMEOUT
        try:
            while len(out) < n:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"kcat printed {len(out)} of {n} records")
                try:
                    line = lines.get(timeout=0.2)
                except queue.Empty:
                    if between is not None:
                        between()
                    continue
                if line is None:
                    raise AssertionError(f"kcat exited after {len(out)} of {n} records: {proc.stderr.read()}")
                if line.strip():
                    out.append(self._record(line))
            return out
        finally:
            stop(proc)

    def consume(self, topic, n, *, start="earliest", produce_after=0, partition=0):
        offset = {"earliest": "beginning", "latest": "end"}.get(start, f"s@{start}")
        proc = self._consume_process(
            self._base("-C", "-J", "-t", topic, "-p", str(partition), "-o", offset, "-c", str(n))
        )
        if not produce_after:
            return self._collect(proc, n)
        sent = [0]

        def trickle() -> None:
            # kcat says nothing once "end" is resolved: send one record at a time until n arrive
            i = sent[0]
            subprocess.run(
                self._produce_argv(topic, partition, None, "all", False),
                input=f"{key('new-', i)}{KEY_DELIMITER}{value('new-', i)}\n",
                capture_output=True, text=True, timeout=TIMEOUT, check=True,
            )
            sent[0] += 1

        return self._collect(proc, n, between=trickle)

    def group_consume(self, topic, group, n):
        # -o in -G mode would override committed offsets: start from them, else earliest
        proc = self._consume_process(
            self._base("-G", group, "-J", "-c", str(n), "-X", "auto.offset.reset=earliest", topic)
        )
        # kcat keeps librdkafka's auto commit: closing after -c n commits what it printed
        lines, _ = proc.communicate(timeout=TIMEOUT)
        assert proc.returncode == 0, f"kcat -G exited {proc.returncode}"
        return [self._record(line) for line in lines.splitlines() if line.strip()]

    def group_of_three(self, topic, group):
        members = [
            subprocess.Popen(
                ["kcat", "-b", self.bootstrap, "-G", group, "-J", "-X", "heartbeat.interval.ms=500", topic],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            )
            for _ in range(3)
        ]
        owned: list[list[int]] = [[], [], []]

        def watch(index: int) -> None:
            # "% Group g rebalanced (memberid ...): assigned: t [0], t [1]" on stderr
            for line in members[index].stderr:
                if "rebalanced" in line and "assigned:" in line:
                    owned[index] = sorted(int(p) for p in re.findall(r"\[(\d+)\]", line))
                elif "rebalanced" in line and "revoked:" in line:
                    owned[index] = []

        for i in range(3):
            threading.Thread(target=watch, args=(i,), daemon=True).start()

        def until(indexes: list[int], what: str) -> None:
            deadline = time.monotonic() + 60
            while True:
                parts = [owned[i] for i in indexes]
                if all(parts) and sorted(p for ps in parts for p in ps) == [0, 1, 2]:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"timed out waiting for {what}: {parts}")
                time.sleep(0.05)

        try:
            until([0, 1, 2], "three members holding a partition each")
            before = [list(p) for p in owned]
            stop(members[0])
            until([1, 2], "two members holding all partitions")
            return {"before": before, "after": [owned[1], owned[2]]}
        finally:
            for member in members:
                stop(member)

    def consumer_protocol_missing(self):
        """librdkafka has group.protocol from 2.4 (GA in 2.12); Debian's kcat is built on an older one."""
        found = re.search(r"librdkafka ([\d.]+)", self.version)
        if found and tuple(int(x) for x in found.group(1).split(".")[:2]) < (2, 4):
            return (f"{self.version}: this librdkafka has no consumer group protocol (KIP-848, "
                    "group.protocol=consumer came in librdkafka 2.4)")
        return None

    def create_describe_topic(self, topic, partitions):
        raise NotApplicable(NO_ADMIN)

    def alter_configs(self, topic):
        raise NotApplicable(NO_ADMIN)

    def create_partitions(self, topic, total):
        raise NotApplicable(NO_ADMIN)

    def delete_records(self, topic, before):
        raise NotApplicable(NO_ADMIN)

    def delete_topic(self, topic):
        raise NotApplicable(NO_ADMIN)

    def list_describe_groups(self, topic, group):
        raise NotApplicable(NO_ADMIN)


def stop(proc: subprocess.Popen) -> None:
    """End a kcat we started the way a user does (SIGTERM: it leaves its group), then wait."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=TIMEOUT)
