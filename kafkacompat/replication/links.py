"""Replica links and upstreams as kept in the streams they belong to.

A link (source stream -> HOST:PORT/destination stream) is a record of the
source stream's state table `replica_links`, keyed by the replica's name,
so it lives and dies with the stream, as MapR keeps a stream's replica
list in the stream. An upstream (a stream that replicates into this one) is
a record of the destination stream's table `replica_upstreams`.
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any

LINKS_TABLE = "replica_links"
UPSTREAMS_TABLE = "replica_upstreams"
COMPRESSIONS = ("none", "lz4", "zstd")

_REPLICA = re.compile(r"^(?P<host>\[[^\]]+\]|[^:/\s]+):(?P<port>\d{1,5})(?P<path>/\S*)$")


class LinkSpecError(ValueError):
    """A replica or upstream argument that cannot be used."""


def parse_replica(text: str) -> tuple[str, int, str]:
    """(host, port, stream path) from HOST:PORT/stream/path."""
    match = _REPLICA.match(text.strip())
    if match is None:
        raise LinkSpecError(f"replica {text!r} is not HOST:PORT/stream/path")
    port = int(match["port"])
    if not 0 < port < 65536:
        raise LinkSpecError(f"replica {text!r}: port {port} is out of range")
    return match["host"].strip("[]"), port, match["path"].rstrip("/") or "/"


@dataclasses.dataclass(slots=True)
class LinkSpec:
    """What a user set for one replica link."""

    source: str  # the source stream's path (this cluster)
    host: str
    port: int
    dest: str  # the destination stream's path there
    paused: bool = False
    throttle_mb_s: float = 0.0  # 0: unthrottled
    compression: str = "none"
    created_ms: int = dataclasses.field(default_factory=lambda: int(time.time() * 1000))
    known_topics: list[str] = dataclasses.field(default_factory=list)  # topics shipped: their deletion is shipped
    # topic name -> the generation shipped ([origin cluster UUID, origin topic id]): a new one is a recreation
    topic_gens: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    @property
    def replica(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}{self.dest}"

    def record(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "dest": self.dest, "paused": self.paused,
                "throttle_mb_s": self.throttle_mb_s, "compression": self.compression,
                "created_ms": self.created_ms, "known_topics": self.known_topics, "topic_gens": self.topic_gens}

    @classmethod
    def from_record(cls, source: str, record: dict[str, Any]) -> LinkSpec:
        return cls(source, record["host"], record["port"], record["dest"], record.get("paused", False),
                   record.get("throttle_mb_s", 0.0), record.get("compression", "none"),
                   record.get("created_ms", 0), list(record.get("known_topics", [])),
                   {name: list(gen) for name, gen in record.get("topic_gens", {}).items()})


def check_settings(throttle: Any, compression: Any) -> None:
    if throttle is not None and (isinstance(throttle, bool) or not isinstance(throttle, (int, float)) or throttle < 0):
        raise LinkSpecError(f"throttle must be MB/s >= 0 (0: unthrottled), not {throttle!r}")
    if compression is not None and compression not in COMPRESSIONS:
        raise LinkSpecError(f"compression must be one of {', '.join(COMPRESSIONS)}, not {compression!r}")
