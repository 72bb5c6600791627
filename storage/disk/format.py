"""The on-disk store's format, owned in one place: store.json and its format version, the topic catalog's records.

Three programs read a store's files: the broker (DiskStore), `kafkacompat
store check` (a DiskStore opened offline) and the read-only StoreReader of
the Spark source, which runs in Spark's Python workers beside a running
broker. The `.topics` records were once parsed by each in its own way, so a
change to them had to be found in every reader; they all read and write
them through this module now.

store.json carries the format of the files below it (`format`, written on
every open). A store written by a newer kafkacompat, whose files this code
might misread or rewrite in the old form, is refused before anything is
touched. A store.json without the field was written before the field
existed: format 1, the format this module reads and writes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import StorageError

FORMAT = 1  # raise it with any change older code would misread; add the reading of the old one here


class NewerFormatError(StorageError):
    """The store was written by a newer kafkacompat; nothing was read further or changed."""


def store_state(epoch: int, store_id: str, settings: Mapping[str, str]) -> bytes:
    """store.json's content: this format, the store's open count (leader epoch), its id and settings."""
    return json.dumps({"format": FORMAT, "epoch": epoch, "store_id": store_id, "settings": dict(settings)}).encode()


def check_format(store_file: str) -> None:
    """Raise NewerFormatError if store.json names a format newer than FORMAT.

    A missing or garbled store.json passes: the store rebuilds it (see
    read_epoch), and without a format field the store is format 1.
    """
    try:
        with open(store_file, "rb") as f:
            state = json.loads(f.read())
    except (OSError, ValueError):
        return
    found = state.get("format", 1) if isinstance(state, dict) else 1
    if type(found) is int and found > FORMAT:
        raise NewerFormatError(f"{store_file} says the store is format {found}, written by a newer kafkacompat; "
                               f"this one reads format {FORMAT} and older: run the newer kafkacompat (nothing "
                               "was changed)")


def read_epoch(store_file: str) -> tuple[int, str | None]:
    """(epoch, None), (0, None) for a new store, or (0, what is wrong with store.json)."""
    try:
        with open(store_file, "rb") as f:
            state = json.loads(f.read())
        epoch = state["epoch"]
        if not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch {epoch!r} is not a count")
        return epoch, None
    except FileNotFoundError:
        return 0, None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        return 0, f"is garbled ({exc})"


def read_identity(store_file: str) -> tuple[uuid.UUID | None, dict[str, str] | None]:
    """(store id, settings) kept beside the epoch; None for what a store made before them, or a garbled file, lacks."""
    store_id = settings = None
    try:
        with open(store_file, "rb") as f:
            state = json.loads(f.read())
        store_id = uuid.UUID(state["store_id"])
        settings = {str(k): str(v) for k, v in state.get("settings", {}).items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass
    return store_id, settings


# The topic catalog (.topics): JSON lines, each a topic created or changed
# {"t": name, "id": 32 hex digits, "p": partitions, "c": {config: value}, "at": created ms}
# or deleted {"t": name, "del": 1}; the last record of a name wins.


def topic_record(name: str, topic_id: str, partitions: int, configs: Mapping[str, Any], created_ms: int) -> dict:
    return {"t": name, "id": topic_id, "p": partitions, "c": configs, "at": created_ms}


def topic_deleted(name: str) -> dict:
    return {"t": name, "del": 1}


def replay_topics(records: Iterable[dict]) -> tuple[dict[str, dict], int]:
    """(name -> its live record, count of incomplete records skipped), from the catalog's records in order."""
    live: dict[str, dict] = {}
    bad = 0
    for rec in records:
        # Checked inline and cheaply: a million records pass here on every open.
        try:
            name = rec["t"]
            if type(name) is not str:
                bad += 1
            elif rec.get("del"):
                live.pop(name, None)
            elif (type(rec["p"]) is int and rec["p"] > 0 and type(rec["id"]) is str and len(rec["id"]) == 32
                  and type(rec["c"]) is dict and type(rec["at"]) is int):
                live[name] = rec
            else:
                bad += 1
        except KeyError:
            bad += 1
    return live, bad
