"""Admin API results as text for people: key-value blocks and aligned tables.

Input is the JSON the broker answers (see stream_views.py); --json prints
that JSON instead, for scripts.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..units import format_bytes, format_duration, format_time_ms


def error_line(text: str, as_json: bool) -> str:
    """An error for stderr: one line for people, or under --json one JSON object a script can parse."""
    return json.dumps({"error": text}) if as_json else f"kafkacompat: error: {text}"


def fail(text: str, as_json: bool = False) -> int:
    """Print an error (see error_line); exit status 1."""
    print(error_line(text, as_json), file=sys.stderr)
    return 1


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns two spaces apart, header first."""
    cells = [[str(c) for c in header]] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def block(pairs: Sequence[tuple[str, Any]]) -> str:
    """'Label:  value' lines with the values aligned."""
    width = max(len(label) for label, _ in pairs) + 2
    return "\n".join(f"{label + ':':<{width}}{'-' if value in (None, '') else value}" for label, value in pairs)


def _yes(flag: bool) -> str:
    return "true" if flag else "false"


def stream_block(s: dict[str, Any]) -> str:
    ttl = s["ttl_seconds"]
    perms = s["permissions"]
    return block([
        ("Stream", s["path"] + ("  (default stream for plain topic names)" if s.get("default_stream") else "")),
        ("Topics", s["topics"]),
        ("Time-to-live", format_duration(ttl) + (f" ({ttl} s)" if ttl else "")),
        ("Default partitions", s["default_partitions"]),
        ("Autocreate", _yes(s["autocreate"])),
        ("Fsync", s["fsync"]),
        ("Partitionlet size", format_bytes(s["partitionlet_bytes"])),
        ("Cleanup policy", s.get("cleanup_policy", "delete")),
        ("Produce permission", perms["produce"]),
        ("Consume permission", perms["consume"]),
        ("Topic permission", perms["topic"]),
        ("Admin permission", perms["admin"]),
        ("Copy permission", perms["copy"]),
        ("Created", format_time_ms(s["created_ms"])),
    ])


def stream_table(streams: list[dict[str, Any]]) -> str:
    if not streams:
        return "No streams."
    return table(
        ["PATH", "TOPICS", "TTL", "PARTITIONS", "AUTOCREATE", "FSYNC", "PARTITIONLET-SIZE"],
        [
            [s["path"], s["topics"], format_duration(s["ttl_seconds"]), s["default_partitions"],
             _yes(s["autocreate"]), s["fsync"], format_bytes(s["partitionlet_bytes"])]
            for s in streams
        ],
    )


def _configs(t: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(t["configs"].items())) or "(stream defaults)"


def topic_summary(t: dict[str, Any]) -> str:
    return block([
        ("Topic", t["name"]),
        ("Kafka name", t["kafka_name"]),
        ("Topic id", t["topic_id"]),
        ("Partitions", t["partitions"]),
        ("Messages", t["messages"]),
        ("Size", format_bytes(t["size_bytes"])),
        ("Configs", _configs(t)),
        ("Created", format_time_ms(t["created_ms"])),
    ])


def _offsets(p: dict[str, Any]) -> str:
    return f"{p['base_offset']}-{p['next_offset'] - 1}" if p["next_offset"] > p["base_offset"] else "(empty)"


def topic_detail(t: dict[str, Any]) -> str:
    parts = t["partition_detail"]
    partitions = table(
        ["PARTITION", "START", "END", "MESSAGES", "SIZE", "PARTITIONLETS"],
        [[p["partition"], p["log_start_offset"], p["high_watermark"], p["messages"], format_bytes(p["size_bytes"]),
          len(p["partitionlets"])] for p in parts],
    )
    lets = [
        [p["partition"], i, _offsets(pl), format_bytes(pl["size_bytes"]), "sealed" if pl["sealed"] else "active",
         pl["volume"]]
        for p in parts for i, pl in enumerate(p["partitionlets"])
    ]
    out = [topic_summary(t), "", partitions]
    if lets:
        out += ["", table(["PARTITION", "PARTITIONLET", "OFFSETS", "SIZE", "STATE", "VOLUME"], lets)]
    return "\n".join(out)


def topic_table(topics: list[dict[str, Any]]) -> str:
    if not topics:
        return "No topics."
    return table(
        ["TOPIC", "KAFKA-NAME", "PARTITIONS", "MESSAGES", "SIZE"],
        [[t["topic"], t["kafka_name"], t["partitions"], t["messages"], format_bytes(t["size_bytes"])] for t in topics],
    )


def all_topics_table(topics: list[dict[str, Any]]) -> str:
    """Every stream's topics by canonical name (plain names for the default stream), like kafka-topics --list."""
    if not topics:
        return "No topics."
    return table(
        ["TOPIC", "KAFKA-NAME", "PARTITIONS", "MESSAGES", "SIZE"],
        [[t["name"], t["kafka_name"], t["partitions"], t["messages"], format_bytes(t["size_bytes"])]
         for t in sorted(topics, key=lambda t: (t["stream"], t["topic"]))],
    )


def cursor_table(cursors: list[dict[str, Any]]) -> str:
    if not cursors:
        return "No cursors."
    return table(
        ["GROUP", "TOPIC", "PARTITION", "OFFSET", "END", "LAG", "COMMITTED"],
        [[c["group"], c["topic"], c["partition"], c["offset"], c["end_offset"], c["lag"],
          format_time_ms(c["commit_time_ms"])] for c in cursors],
    )


def count_of(n: int, word: str) -> str:
    """'1 topic', '3 topics'."""
    return f"{n} {word}" + ("" if n == 1 else "s")


RENDERERS: dict[str, Callable[[Any], str]] = {
    "stream.create": lambda s: f"Created stream {s['path']}.\n\n" + stream_block(s),
    "stream.edit": lambda s: f"Updated stream {s['path']}.\n\n" + stream_block(s),
    "stream.info": stream_block,
    "stream.list": stream_table,
    "stream.delete": lambda r: f"Deleted stream {r['path']} with its topics and cursors.",
    "stream.purge": lambda s: f"Purged stream {s['path']}: emptied {count_of(s['topics'], 'topic')} "
                              "and deleted its cursors.",
    "topic.create": lambda t: f"Created topic {t['name']} with {count_of(t['partitions'], 'partition')} "
                              f"(Kafka name {t['kafka_name']}).",
    "topic.edit": lambda t: f"Updated topic {t['name']}: {count_of(t['partitions'], 'partition')}; "
                            f"configs {_configs(t)}.",
    "topic.info": topic_detail,
    "topic.list": topic_table,
    "topic.delete": lambda r: f"Deleted topic {r['topic']} from stream {r['stream']}.",
    "cursor.list": cursor_table,
    "cursor.delete": lambda r: f"Deleted {count_of(len(r['deleted']), 'cursor')} of group {r['group']} "
                               f"in stream {r['stream']}.",
}


def render(op: str, result: Any) -> str:
    return RENDERERS[op](result)
