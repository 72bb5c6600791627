"""What a nemesis acts on: the brokers of one engine, their processes and their storage.

A campaign knows only this interface, so the disk engine (one `kafkacompat
serve` on the embedded store), the cloud engine (three brokers sharing
PostgreSQL and S3) and the replication engine (three clusters linked in a chain or a ring) plug into
the same workload, nemesis and checker. Process faults are the same everywhere (kill -9, SIGSTOP, SIGTERM);
storage faults are the engine's own, each a `StorageFault`.
"""

from __future__ import annotations

import abc
import dataclasses
import random
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class StorageFault:
    """One kind of damage an engine can do to its own storage.

    `apply` does it and returns what the history should say (a `damage`
    span {topic, partition, first, end} when records may be lost with it,
    `cursors: True` when committed offsets may be); `live` faults are done
    while the brokers run, the others while they are stopped; `heal`, if
    any, undoes a live fault after the nemesis has held it.
    """

    name: str
    apply: Callable[[random.Random], dict[str, Any]]
    live: bool = False
    heal: Callable[[], None] | None = None


class Engine(abc.ABC):
    """Brokers a campaign starts, stops and damages; `bootstrap` is what clients connect to, `nodes` the
    brokers' ids (process faults hit one of them at a time)."""

    name: str
    bootstrap: str
    nodes: list[int]
    final_checks_s: float = 0.0  # the longest final_checks may legitimately wait (added to the closing deadline)

    @abc.abstractmethod
    def start(self) -> bool:
        """Start every stopped broker and wait until it listens; False (and a history line) if one cannot."""

    @abc.abstractmethod
    def kill(self, node: int | None = None) -> None:
        """SIGKILL broker `node` (None: every broker)."""

    @abc.abstractmethod
    def stop(self, node: int | None = None) -> None:
        """SIGTERM broker `node` (None: every broker) and wait for it to end (the history gets its exit status)."""

    @abc.abstractmethod
    def pause(self, node: int | None = None) -> None:
        """SIGSTOP broker `node` (None: every broker)."""

    @abc.abstractmethod
    def resume(self, node: int | None = None) -> None:
        """SIGCONT broker `node` (None: every broker)."""

    @abc.abstractmethod
    def setup(self, rng: random.Random) -> dict[str, Any]:
        """Create the workload's streams and topics; returns the settings chosen (e.g. the fsync policy)."""

    @abc.abstractmethod
    def storage_faults(self) -> list[StorageFault]:
        """The storage faults this engine can undergo."""

    def prepare_final_read(self) -> None:
        """Before the closing restart: what the final read needs that the run did without (default: nothing)."""

    def final_checks(self) -> None:
        """After the final read, brokers up: what else the engine promises, read into history events (default:
        nothing; the replication engine reads each replica, the carried cursors and a failover)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop everything and release what the engine holds (processes, mounts)."""
