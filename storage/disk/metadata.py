"""Reading the store's own metadata files defensively.

A damaged file (garbage, zeroes, a flipped byte, cut short) must never stop
the broker with a traceback: each reader returns what it could read and
what is wrong, and the store decides what to do (rebuild, skip, refuse)
and reports it as a Finding, one log line per file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable

from . import layout


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """One damaged file: what is wrong with it and what the store does (or would do) about it."""

    path: str
    problem: str
    action: str


STREAM_FILES = {layout.STREAM_FILE, layout.TOPICS_FILE, layout.CURSORS_FILE}


def holds_partition_data(topic_dir: str, indexes: list[int]) -> bool:
    for index in indexes:
        try:
            names = os.listdir(os.path.join(topic_dir, str(index)))
        except (FileNotFoundError, NotADirectoryError):
            continue
        if any(n == layout.MANIFEST_FILE or n.endswith(layout.LOG_SUFFIX) for n in names):
            return True
    return False


def holds_topics(entries: list[os.DirEntry]) -> bool:
    """Whether a directory without stream files holds topic directories with partition data."""
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            try:
                indexes = [int(d) for d in os.listdir(entry.path) if d.isdigit()]
            except (FileNotFoundError, NotADirectoryError):
                continue
            if indexes and holds_partition_data(entry.path, indexes):
                return True
    return False


_HEX_ID = re.compile(r"[0-9a-f]{32}")


def is_hex_id(text: str) -> bool:
    """A topic id as the catalog and manifests write it (uuid hex)."""
    return _HEX_ID.fullmatch(text) is not None


def read_stream_file(path: str, parse_policy: Callable[[dict], object]) -> tuple[dict | None, str | None]:
    """(metadata, None) or (None, what is wrong with the .stream file); parse_policy raises on a bad policy."""
    try:
        with open(path, "rb") as f:
            meta = json.loads(f.read())
        parse_policy(meta["policy"])
        int(meta["created_ms"])
        return meta, None
    except FileNotFoundError:
        return None, "is missing"
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        return None, f"is garbled ({exc})"


def find_streams(root: str) -> list[tuple[str, str]]:
    """(stream path, directory) of every stream under a volume; streams do not nest, so stop at each.

    A stream is known by its own files, or, when all of them are lost,
    by topic directories holding partition data.
    """
    found = []
    stack = [("", layout.streams_root(root))]
    while stack:
        rel, directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            continue
        names = {e.name for e in entries}
        if names & STREAM_FILES or (rel and holds_topics(entries)):
            found.append((rel, directory))
            continue
        stack.extend((f"{rel}/{e.name}", e.path) for e in entries if e.is_dir(follow_symlinks=False))
    return found
