"""Where things live on disk: one place for every path and file name.

<volume>/streams/<stream path>/.stream            stream policy (first volume); a damaged one is kept
                                                  as .stream.damaged when rebuilt
                               .topics            topic catalog, JSON lines
                               .cursors           cursor log, JSON lines
                               .state.<table>     a broker feature's state table, JSON lines
                               <topic>/<index>/chain.json       manifest (first volume)
                               <topic>/<index>/<base:020>.log   + .index, .timeindex
                               <topic>/<index>/<base:020>-g<n>.log  the same partitionlet rewritten by
                                                  the log cleaner for the n-th time
<volume>/volume.id                                the id manifests name the volume by
<volume>/ballast                                  room kept for metadata on a full disk
<volume>/store.json, .clean, .lock                format version, store epoch, id and settings (read and
                                                  written by format.py); clean-shutdown marker; flock of
                                                  the running store (first volume)
<volume>/trash/                                   deleted trees awaiting removal

Topic names may start with '.', which would collide with the stream's own
files, so such a topic's directory is prefixed with '%' (never legal in a
topic name).
"""

from __future__ import annotations

import os

STREAMS = "streams"
TRASH = "trash"
STREAM_FILE = ".stream"
TOPICS_FILE = ".topics"
CURSORS_FILE = ".cursors"
STATE_PREFIX = ".state."  # + table name
MANIFEST_FILE = "chain.json"
STORE_FILE = "store.json"
VOLUME_ID_FILE = "volume.id"
BALLAST_FILE = "ballast"
CLEAN_MARKER = ".clean"
LOCK_FILE = ".lock"
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
PARTITIONLET_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX)


def streams_root(volume: str) -> str:
    return os.path.join(volume, STREAMS)


def stream_dir(volume: str, stream_path: str) -> str:
    return os.path.join(volume, STREAMS, stream_path.lstrip("/"))


def topic_dirname(name: str) -> str:
    return "%" + name if name.startswith(".") else name


def topic_dir(volume: str, stream_path: str, topic: str) -> str:
    return os.path.join(stream_dir(volume, stream_path), topic_dirname(topic))


def partition_dir(volume: str, stream_path: str, topic: str, index: int) -> str:
    return os.path.join(topic_dir(volume, stream_path, topic), str(index))


def partitionlet_stem(directory: str, base_offset: int, generation: int = 0) -> str:
    """Where a partitionlet's files live; a cleaned one gets a new generation, so the
    rewrite never overwrites the files the chain manifest still lists."""
    stem = os.path.join(directory, f"{base_offset:020d}")
    return f"{stem}-g{generation}" if generation else stem


def is_partitionlet_file(name: str) -> bool:
    """Whether a file name is one of a partitionlet's (any generation)."""
    stem, dot, suffix = name.partition(".")
    base, _, generation = stem.partition("-g")
    return bool(dot) and base.isdigit() and (not generation or generation.isdigit()) and (
        "." + suffix in PARTITIONLET_SUFFIXES)


def trash_dir(volume: str) -> str:
    return os.path.join(volume, TRASH)
