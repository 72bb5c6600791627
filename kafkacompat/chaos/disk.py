"""The disk engine: one `kafkacompat serve` on the embedded store, started as a user starts it.

The broker runs as a subprocess (`python -m kafkacompat serve`) with
`--skip-damaged`, so reads step over quarantined ranges and say so in the
log; or without it (`--no-skip-damaged`), so consumers reaching a
quarantined range must be told (CORRUPT_MESSAGE), and only the closing
restart for the final read adds it; its data dir sits on a small tmpfs when this machine lets us mount one
(root), so a full disk is a real ENOSPC. Its log goes to `broker.log` in the
campaign's directory, and every line naming quarantined offsets becomes a
`quarantine` event, which is how the checker learns what the broker admits
to having lost. Storage faults damage the files docs/operations.md's "Damaged
storage" names: partitionlet logs (sealed or active), metadata
files, and the free space of the volume.
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..testing.ports import free_port
from .engine import Engine, StorageFault
from .history import History
from .process import BrokerProcess
from .workload import PARTITIONS

STREAM = "/chaos"
PARTITIONLET_SIZE = "32KiB"  # a partitionlet seals every few hundred records: sealed ones to damage
PATH_RE = re.compile(r"streams/chaos/(?P<topic>[^/\s]+)/(?P<partition>\d+)/")
NAME_RE = re.compile(r"/chaos:(?P<topic>[^/\s:]+)/(?P<partition>\d+):")
OFFSETS_RE = re.compile(r"offsets (\d+)\.\.(\d+)")
BATCH_HEADER = 61  # bytes of a record batch before its records (baseOffset int64, batchLength int32, ...)
Damage = Callable[[Path, random.Random], str]  # damages one file, says how


class DiskEngine(Engine):
    name = "disk"

    def __init__(self, workdir: Path, history: History, tmpfs_mb: int = 64, skip_damaged: bool = True) -> None:
        self.workdir, self.history, self.skip_damaged = workdir, history, skip_damaged
        self.volume = workdir / "disk"
        self.volume.mkdir(parents=True, exist_ok=True)
        self.tmpfs = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={tmpfs_mb}m", "tmpfs", str(self.volume)],
                                    capture_output=True).returncode == 0
        self.data = self.volume / "data"
        self.filler = self.volume / "filler"
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.nodes = [1]
        self.log = open(workdir / "broker.log", "a", encoding="utf-8")
        self.broker = BrokerProcess(
            1, ["--data-dir", str(self.data), "--host", "127.0.0.1", "--port", str(self.port),
                "--group-initial-rebalance-delay-ms", "500", *(["--skip-damaged"] if skip_damaged else [])],
            history, self.log, threading.Lock(), on_line=self._quarantine, clean_marker=self.data / ".clean")

    # processes: there is one, so `node` is always it

    def start(self) -> bool:
        return self.broker.start()

    def kill(self, node: int | None = None) -> None:
        self.broker.kill()

    def stop(self, node: int | None = None) -> None:
        self.broker.stop()

    def pause(self, node: int | None = None) -> None:
        self.broker.signal(signal.SIGSTOP)

    def resume(self, node: int | None = None) -> None:
        self.broker.signal(signal.SIGCONT)

    def prepare_final_read(self) -> None:
        if not self.skip_damaged:
            self.broker.serve_args.append("--skip-damaged")

    def _quarantine(self, line: str) -> None:
        if "quarantin" not in line and "skipping damaged" not in line:
            return
        where = PATH_RE.search(line) or NAME_RE.search(line)
        if where is None:
            return
        topic = "chaos.." + where["topic"]
        for first, last in OFFSETS_RE.findall(line):
            self.history.record("quarantine", topic=topic, partition=int(where["partition"]), first=int(first),
                                last=int(last), line=line)

    def close(self) -> None:
        self.broker.kill()
        if self.tmpfs:
            subprocess.run(["umount", "-l", str(self.volume)], capture_output=True)
        self.log.close()

    # the workload's topics

    def setup(self, rng: random.Random) -> dict[str, Any]:
        fsync = rng.choice(["none", "interval", "always"])
        cli = [sys.executable, "-m", "kafkacompat"]
        where = ["--bootstrap-server", self.bootstrap.split(",")[0]]  # the workers engine's controller
        commands = [["stream", "create", STREAM, "--fsync", fsync, "--partitionlet-size", PARTITIONLET_SIZE,
                     "--ttl", "0"]]
        for topic, count in PARTITIONS.items():
            commands.append(["topic", "create", f"{STREAM}:{topic.split('..')[1]}", "--partitions", str(count)])
        for command in commands:
            subprocess.run(cli + command + where, check=True, capture_output=True, timeout=60)
        return {"fsync": fsync, "partitionlet_size": PARTITIONLET_SIZE, "tmpfs": self.tmpfs,
                "skip_damaged": self.skip_damaged}

    # storage faults

    def storage_faults(self) -> list[StorageFault]:
        faults = [
            StorageFault("flip-sealed", lambda rng: self._damage_log(rng, sealed=True, how=flip)),
            StorageFault("flip-sealed-live", lambda rng: self._damage_log(rng, sealed=True, how=flip), live=True),
            StorageFault("truncate-sealed", lambda rng: self._damage_log(rng, sealed=True, how=truncate)),
            StorageFault("flip-active", lambda rng: self._damage_log(rng, sealed=False, how=flip)),
            StorageFault("flip-active-live", lambda rng: self._damage_log(rng, sealed=False, how=flip), live=True),
            StorageFault("truncate-active", lambda rng: self._damage_log(rng, sealed=False, how=truncate)),
            StorageFault("zero-active-tail", lambda rng: self._damage_log(rng, sealed=False, how=zero_tail)),
            StorageFault("delete-active", lambda rng: self._damage_log(rng, sealed=False, how=delete)),
            StorageFault("delete-metadata", lambda rng: self._damage_metadata(rng, garble=False)),
            StorageFault("garble-metadata", lambda rng: self._damage_metadata(rng, garble=True)),
        ]
        if self.tmpfs:
            faults.append(StorageFault("full-disk", self._fill, live=True, heal=self._free))
        return faults

    def _partitions(self) -> list[tuple[str, int, Path]]:
        root = self.data / "streams" / STREAM.strip("/")
        return [("chaos.." + t.name, int(p.name), p) for t in sorted(root.iterdir()) if t.is_dir()
                for p in sorted(t.iterdir()) if p.is_dir() and p.name.isdigit()]

    def _damage_log(self, rng: random.Random, sealed: bool, how: Damage) -> dict[str, Any]:
        choices = []
        for topic, partition, directory in self._partitions():
            logs = partitionlet_logs(directory)
            spans = [(b, logs[k + 1][0] if k + 1 < len(logs) else None, path) for k, (b, path) in enumerate(logs)]
            for base, end, path in (spans[:-1] if sealed else spans[-1:]):
                if path.stat().st_size > 0:
                    choices.append((topic, partition, base, end, path))
        if not choices:
            return {"skipped": "no partitionlet to damage yet"}
        topic, partition, base, end, path = rng.choice(choices)
        batches = batch_starts(path) if end is None else {}
        detail = how(path, rng)
        out = {"file": str(path.relative_to(self.data)), "detail": detail,
               "damage": {"topic": topic, "partition": partition, "first": base, "end": end}}
        unnoticeable = cut_at_boundary(path, batches)
        if unnoticeable is not None:
            out["damage"]["unnoticeable_from"] = unnoticeable
        return out

    def _damage_metadata(self, rng: random.Random, garble: bool) -> dict[str, Any]:
        stream = self.data / "streams" / STREAM.strip("/")
        candidates = [self.data / "store.json", self.data / "volume.id", stream / ".topics", stream / ".stream",
                      stream / ".cursors"]
        for _, _, directory in self._partitions():
            candidates += [directory / "chain.json", *sorted(directory.glob("*.index")),
                           *sorted(directory.glob("*.timeindex"))]
        existing = [p for p in candidates if p.exists()]
        if not existing:
            return {"skipped": "no metadata file yet"}
        path = rng.choice(existing)
        detail = garble_file(path, rng) if garble else delete(path, rng)
        return {"file": str(path.relative_to(self.data)), "detail": detail, "cursors": path.name == ".cursors"}

    def _fill(self, rng: random.Random) -> dict[str, Any]:
        written = 0
        with open(self.filler, "ab", buffering=0) as f:
            for chunk in (1 << 20, 1 << 12, 1 << 9):
                try:
                    while True:
                        written += f.write(bytes(chunk))
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
        return {"filled": written, "free": os.statvfs(self.volume).f_bavail}

    def _free(self) -> None:
        self.filler.unlink(missing_ok=True)


def partitionlet_logs(directory: Path) -> list[tuple[int, Path]]:
    """(base offset, path) of a partition's partitionlet logs, in offset order."""
    logs = []
    for path in directory.glob("*.log"):
        base = path.name.split(".")[0].split("-g")[0]
        if base.isdigit():
            logs.append((int(base), path))
    return sorted(logs)


def cut_at_boundary(path: Path, batches: dict[int, int]) -> int | None:
    """The first offset cut off when an active log (whose `batch_starts` were `batches` before the damage)
    was cut exactly at a batch boundary at or past the size its manifest last checkpointed: the one loss a
    start after an unclean stop cannot see (docs/operations.md, "Damaged storage"). None for any other damage."""
    size = path.stat().st_size if path.exists() else None
    if size is None or size not in batches or size == max(batches, default=-1):
        return None  # deleted (a start sees that), cut inside a batch, or not cut at all
    try:
        checkpoint = json.loads((path.parent / "chain.json").read_text())["partitionlets"][-1]["size"]
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        checkpoint = 0  # no manifest to compare with: nothing tells the start that bytes went
    return batches[size] if size >= checkpoint else None


def batch_starts(path: Path) -> dict[int, int]:
    """{byte position: base offset} of every whole batch in a log, and {size: next offset} at its end."""
    data = path.read_bytes()
    starts, pos, next_offset = {}, 0, None
    while pos + BATCH_HEADER <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        last_delta = struct.unpack_from(">i", data, pos + 23)[0]
        if length < BATCH_HEADER - 12 or pos + 12 + length > len(data):
            break
        starts[pos], next_offset = base, base + last_delta + 1
        pos += 12 + length
    if next_offset is not None:
        starts[pos] = next_offset
    return starts


def flip(path: Path, rng: random.Random) -> str:
    size = path.stat().st_size
    at = rng.randrange(size) if rng.random() < 0.5 else rng.randrange(max(0, size - 300), size)  # often the tail
    bit = 1 << rng.randrange(8)
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ bit]))
    return f"bit {bit:#04x} flipped at byte {at}"


def truncate(path: Path, rng: random.Random) -> str:
    size = path.stat().st_size
    cut = rng.randrange(size)
    os.truncate(path, cut)
    return f"truncated from {size} to {cut} bytes"


def zero_tail(path: Path, rng: random.Random) -> str:
    size = path.stat().st_size
    count = min(size, rng.randint(100, 4000))
    with open(path, "r+b") as f:
        f.seek(size - count)
        f.write(bytes(count))
    return f"last {count} of {size} bytes zeroed"


def delete(path: Path, rng: random.Random) -> str:
    path.unlink()
    return "deleted"


def garble_file(path: Path, rng: random.Random) -> str:
    data = path.read_bytes()
    mode = rng.choice(["truncated", "zeroed", "garbage"])
    if mode == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif mode == "zeroed":
        path.write_bytes(bytes(len(data)))
    else:
        path.write_bytes(rng.randbytes(max(8, len(data))))
    return mode
